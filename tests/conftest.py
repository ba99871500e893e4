"""Shared pytest fixtures: where the built CLI and the shared test data are."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _pagoda_bin() -> pathlib.Path:
    env = os.environ.get("PAGODA_BIN")
    return pathlib.Path(env) if env else ROOT / "build" / "src" / "cli" / "pagoda"


def _shared_dir() -> pathlib.Path:
    env = os.environ.get("PAGODA_SHARED_DIR")
    return pathlib.Path(env) if env else ROOT.parent / "shared"


@pytest.fixture(scope="session")
def pagoda_bin() -> pathlib.Path:
    path = _pagoda_bin()
    if not path.exists():
        pytest.skip(f"pagoda binary not built at {path} (run `make build` or set PAGODA_BIN)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    return _shared_dir()


@pytest.fixture(scope="session")
def qwen_tokenizers(shared_dir) -> pathlib.Path:
    path = shared_dir / "qwen-tokenizers"
    if not path.exists():
        pytest.skip(f"no Qwen tokenizer files at {path}")
    return path
