"""A CPU with AVX2 only (no bf16 kernels), simulated on an AVX-512/AMX machine for timing runs:
after torch is imported, its CPU probes answer no AVX-512, AMX or bf16 kernels, so vLLM loads its
AVX2 kernels (``vllm._C_AVX2``) and eagle3 takes its fp32 paths; the environment keeps torch's,
oneDNN's and MKL's kernels at AVX2 (fp32 matmuls 102 GFLOPS a core here against 160). Nothing of
the project imports this; it is loaded by putting its folder first on PYTHONPATH::

    PYTHONPATH=benchmarks/avx2_sim:$PWD ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
        MKL_ENABLE_INSTRUCTIONS=AVX2 .venv/bin/pytest -n 3 --dist loadgroup --no-loadscope-reorder

(The vLLM servers the tests start inherit PYTHONPATH; the extraction worker, which sets its own,
runs in fp32 on any CPU.)"""

import importlib.abc
import sys


def _patch(torch):
    no = lambda *a, **k: False  # noqa: E731
    for name in (
        "_is_avx512_supported",
        "_is_avx512_vnni_supported",
        "_is_avx512_bf16_supported",
        "_is_amx_tile_supported",
        "_is_amx_fp16_supported",
    ):
        if hasattr(torch.cpu, name):
            setattr(torch.cpu, name, no)
    torch.ops.mkldnn._is_mkldnn_bf16_supported = _Answers(torch.ops.mkldnn._is_mkldnn_bf16_supported, False)


class _Answers:
    """The op packet, but called it answers ``value`` (torch.export walks packets for overloads)."""

    def __init__(self, packet, value):
        self._packet, self._value = packet, value

    def __call__(self, *args, **kwargs):
        return self._value

    def __getattr__(self, name):
        return getattr(self._packet, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps torch's loader on every lookup (a bare find_spec probe must not use the hook up)."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
