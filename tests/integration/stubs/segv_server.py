"""A server that dies of SIGSEGV during start-up, after writing a few log lines, as a
llama-server built with an unusable CPU path does."""

import os
import signal
import sys

print("main: loading model", flush=True)
print("load_tensors: CPU_REPACK model buffer size = 10.00 MiB", file=sys.stderr, flush=True)
print("init: llama threadpool init, n_threads = 2", file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
