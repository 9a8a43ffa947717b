"""Runs under ContextTape's own Python (contexttape from PyPI, its own virtualenv): one JSON job on stdin.

{"search": DIR, "queries": [[floats]...], "k": 5}  -> {"isstore": [[tid...]...], "multistore": [[tid...]...]}
{"write": DIR, "items": [[text, [floats], quantize]...]} -> {"pairs": [[tid, eid]...]}
Imports only contexttape and numpy, so it checks what ContextTape itself reads and writes.
"""

import json
import sys

import numpy as np
from contexttape.storage import ISStore, MultiStore


def main() -> None:
    job = json.load(sys.stdin)
    if "search" in job:
        st = ISStore(job["search"])
        multi = MultiStore([st])
        out = {"isstore": [], "multistore": [], "pairs": len(st.list_pairs())}
        for q in job["queries"]:
            q = np.asarray(q, np.float32)
            out["isstore"].append([tid for _, tid, _ in st.search_by_vector(q, top_k=job["k"])])
            out["multistore"].append(
                [tid for _, _, tid, _ in multi.search(q, per_shard_k=job["k"], final_k=job["k"])]
            )
    else:
        st = ISStore(job["write"])
        out = {
            "pairs": [
                list(
                    st.append_text_with_embedding(text, np.asarray(vec, np.float32), quantize=quant)
                )
                for text, vec, quant in job["items"]
            ]
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
