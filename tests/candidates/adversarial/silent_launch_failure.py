"""Cheat: a launch that fails (1 MiB of shared memory) with the error cleared and ignored; the output is stale memory."""
# harness-expect: problem=relu static=clean strict=wrong_output kernelbench=any
# harness-base: bases/quiet_extension.py (five quiet kernels and their bindings, built once as `_quiet`)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _quiet.relu_smem(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream(x.device).cuda_stream)
        return y
