"""Hostile programs for the sandbox battery (kept as data: name → source template).

`{secret_path}` and `{outside_path}` are filled in by the test with paths on the host.
"""

FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
BUSY_LOOP = "while True:\n    pass\n"
MEMORY_BOMB = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 2**20))\n"
NETWORK = """
import socket
socket.create_connection(("1.1.1.1", 80), timeout=3).close()
print("CONNECTED")
"""
PRINT_ENV = "import os\nprint(dict(os.environ))\n"
READ_SHADOW = "print(open('/etc/shadow').read())\n"
READ_SECRET = "print(open({secret_path!r}).read())\n"
WRITE_OUTSIDE = "open({outside_path!r}, 'w').write('pwned')\nprint('WROTE')\n"
KILL_PARENT = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('still here')\n"
GIGABYTE_OUTPUT = "import sys\nchunk = 'x' * 2**20\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
