"""rmtbase.models._safetensors against the safetensors library (torch framework): the same
values for every float dtype, bfloat16 widened exactly, and a one-line reason for bad files."""

import numpy as np
import pytest
import torch
from safetensors.torch import safe_open, save_file

from rmtbase.models._safetensors import SafetensorsError, read_float32, read_header


def test_values_equal_the_library(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {f"t.{dt}": torch.randn(7, 33, generator=g).to(dt)
               for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16)}
    tensors["scalar"] = torch.tensor(3.5)
    tensors["empty"] = torch.zeros(0, 4)
    tensors["special"] = torch.tensor([0.0, -0.0, 2.0**-130, -1e-40, 65504.0]).to(torch.bfloat16)
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path))
    header, _ = read_header(path)
    with safe_open(str(path), framework="pt") as f:
        for name in tensors:
            ref = f.get_tensor(name).float().numpy()
            got = read_float32(path, header[name])
            assert got.dtype == np.float32 and got.shape == ref.shape
            # exact: integers / booleans (bit patterns)
            np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_bad_files_fail_with_a_reason(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"w": torch.ones(64, 64)}, str(path))
    raw = path.read_bytes()
    cases = {b"\x01": "shorter", raw[:8] + b"{not json" + raw[17:]: "not JSON",
             raw[: len(raw) - 100]: f"ends at byte {len(raw):,} but the file has "
                                    f"{len(raw) - 100:,} bytes",
             (10**12).to_bytes(8, "little") + raw[8:]: "header length"}
    for data, reason in cases.items():
        path.write_bytes(data)
        with pytest.raises(SafetensorsError, match=reason):
            read_header(path)
