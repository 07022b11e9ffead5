"""Types lines at an interactive prompt through a pseudo-terminal.

  python3 type_at_prompt.py SECONDS COMMAND [ARGS...] < LINES

Runs COMMAND on a new pseudo-terminal (stdin, stdout and stderr all on it),
waits for a prompt ("> " or ">> " at the end of what it showed, terminal
escape sequences aside), types the next line of LINES and a return, and so
on; after the last line it types Ctrl-D and waits for COMMAND to end. What
the terminal showed goes to stdout; the exit status is COMMAND's. Everything
takes at most SECONDS: then COMMAND is killed, what it showed is printed,
then "\n[timed out waiting for ...]", and the status is 124.
"""
import os
import pty
import re
import select
import signal
import sys
import time

ESCAPE = re.compile(rb"\x1b(\[[0-9;?]*[A-Za-z]|[()][0-9A-Za-z]|[=>])")


def main():
    deadline = time.monotonic() + float(sys.argv[1])
    command = sys.argv[2:]
    lines = sys.stdin.read().splitlines()
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    shown = bytearray()
    seen = 0  # how much of `shown` ended at the last prompt typed at

    def read_some(timeout):
        """Read what the terminal shows; False once the command closed it."""
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
        if not ready:
            return True
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: every end of the terminal is closed
            return False
        shown.extend(data)
        return bool(data)

    def give_up(what):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.stdout.buffer.write(bytes(shown) + b"\n[timed out waiting for " + what + b"]\n")
        sys.exit(124)

    is_open = True
    for line in lines + [None]:
        while is_open and not ESCAPE.sub(b"", bytes(shown[seen:])).endswith(b"> "):
            if time.monotonic() >= deadline:
                give_up(b"a prompt")
            is_open = read_some(deadline - time.monotonic())
        if not is_open:
            break
        seen = len(shown)
        os.write(fd, b"\x04" if line is None else line.encode() + b"\r")
    while is_open and read_some(deadline - time.monotonic()):
        if time.monotonic() >= deadline:
            give_up(b"the end")
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() >= deadline:
            give_up(b"the exit")
        time.sleep(0.05)
    sys.stdout.buffer.write(bytes(shown))
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


main()
