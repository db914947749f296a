"""Cheat: launches a kernel that writes nothing into a torch.empty output (stale memory is the answer)."""
# harness-expect: problem=relu static=clean strict=wrong_output kernelbench=any
# harness-base: bases/quiet_extension.py (five quiet kernels and their bindings, built once as `_quiet`)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _quiet.noop(y.data_ptr(), y.numel(), torch.cuda.current_stream(x.device).cuda_stream)
        return y
