import atexit
import os
import shutil
import tempfile

import pytest
import torch

# torch.compile's on-disk caches outlive a rebuild of fusedops, and a cached
# backward graph names the internal ops it calls: a graph cached by another
# build (0.1 called them scale_bias_clamp_backward, ...) must not run here.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusedops-tests-inductor-")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)

CUDA = torch.cuda.is_available()

# CUDA cases are collected everywhere and skipped, visibly, without a GPU.
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=FLOAT_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def dtype(request):
    return request.param


@pytest.fixture(autouse=True)
def fresh_seed():
    # Fresh random data every run, but reproducible from the printed seed.
    seed = torch.seed()
    yield
    print(f"torch seed: {seed}")


def pytest_addoption(parser):
    parser.addoption(
        "--first-sample-only",
        action="store_true",
        help="run the tests driven by samples.py on each op's first sample only (the aarch64 run under qemu)",
    )


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--first-sample-only"):
        return
    from samples import ALL_SAMPLES

    first = {}
    for sample in ALL_SAMPLES:
        first.setdefault(sample.op, sample)
    keep, drop = [], []
    for item in items:
        sample = getattr(item, "callspec", None) and item.callspec.params.get("sample")
        (drop if sample is not None and first[sample.op] is not sample else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
