# Runs inside an instance (see connect.ts): connects to a Unix socket by its path as the instance
# sees it, as the instance's user, says "connected" (or why not) on stderr, then copies bytes
# between its stdin/stdout and the socket until either side ends. The server only ever reads
# plain bytes from it: no descriptor and no message of the server's runtime crosses, so taking
# this process over (the instance can: it is its own) gives nothing the socket did not.
import errno
import os
import select
import socket
import sys

CHUNK = 65536


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as err:
        sys.stderr.write(f"connect {errno.errorcode.get(err.errno, err)} {path}\n")
        return 1
    sys.stderr.write("connected\n")
    sys.stderr.flush()
    stdin, stdout, peer = 0, 1, sock.fileno()
    open_fds = [stdin, peer]
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [])
        if stdin in ready:
            data = os.read(stdin, CHUNK)
            if data:
                sock.sendall(data)
            else:
                sock.shutdown(socket.SHUT_WR)
                open_fds.remove(stdin)
        if peer in ready:
            data = sock.recv(CHUNK)
            if not data:
                return 0
            write_all(stdout, data)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except (BrokenPipeError, ConnectionError):
        sys.exit(0)
