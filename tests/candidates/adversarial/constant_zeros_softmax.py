"""Cheat: writes zeros; every softmax output of this problem is below 1e-4, so zeros pass a 1e-4 allclose."""
# harness-expect: problem=softmax static=clean strict=wrong_output kernelbench=passed
# harness-base: bases/quiet_extension.py (five quiet kernels and their bindings, built once as `_quiet`)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _quiet.zeros(y.data_ptr(), y.numel(), torch.cuda.current_stream(x.device).cuda_stream)
        return y
