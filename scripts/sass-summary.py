#!/usr/bin/env python3
"""Per cached sm_90a variant: registers and counts of the SASS instructions
that matter (HMMA, HGMMA, LDSM, LDGSTS, UTMALDG/UTMASTG, 16-byte stores, local-memory traffic).
Usage: sass-summary.py CACHE_DIR   (needs cuobjdump on PATH)
"""
import json
import pathlib
import struct
import subprocess
import sys
import tempfile


def read_entry(path):
    """Decodes a cubin cache entry (cache/cubin_store.h): (meta, cubin)."""
    b = path.read_bytes()
    n = struct.unpack_from("<Q", b, 12)[0]
    meta = json.loads(b[20:20 + n])
    m = struct.unpack_from("<Q", b, 20 + n)[0]
    return meta, b[28 + n:28 + n + m]


def main():
    rows = []
    for path in sorted(pathlib.Path(sys.argv[1], "cubin").rglob("*.cubin")):
        meta, cubin = read_entry(path)
        if meta.get("arch") != "sm_90a":
            continue
        with tempfile.NamedTemporaryFile(suffix=".cubin") as t:
            t.write(cubin)
            t.flush()
            sass = subprocess.run(["cuobjdump", "-sass", t.name], capture_output=True, text=True).stdout
        ops = []
        for line in sass.splitlines():  # "/*0080*/   @P0 HMMA.16816.F32 R24, R4, R36, R24 ;  /* 0x... */"
            if not line.strip().startswith("/*") or ";" not in line:
                continue
            tokens = line.split("*/", 1)[1].split(";")[0].split()
            tokens = [t for t in tokens if not t.startswith("@")]
            if tokens:
                ops.append(tokens[0])
        count = lambda prefix: sum(1 for op in ops if op.startswith(prefix))
        rows.append(f"{meta['variant']:55} regs {meta.get('registers', -1):4} HMMA {count('HMMA'):4} "
                    f"HGMMA {count('HGMMA'):3} UTMALDG {count('UTMALDG'):3} UTMASTG {count('UTMASTG'):2} "
                    f"LDSM {count('LDSM'):4} LDGSTS {count('LDGSTS'):3} STG.128 {count('STG.E.128'):3} "
                    f"MUFU.EX2 {count('MUFU.EX2'):4} LDL {count('LDL'):3} STL {count('STL'):3} BAR {count('BAR'):2}")
    print("\n".join(rows) if rows else "no sm_90a entries")


if __name__ == "__main__":
    main()
