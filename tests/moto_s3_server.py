"""moto's S3 server with S3's atomic conditional writes: `python tests/moto_s3_server.py -p PORT`.

moto answers a `PUT` with `If-None-Match: *` by looking the key up, then storing it, without a
lock: two racing creators on its threaded server can both be told they created the object
(seen under load: `test_racing_creators_have_exactly_one_winner[moto]`, winners [5, 0]). S3
itself decides a conditional write atomically, and that is what the store's exclusive creates
rely on. So every object `PUT` here holds one lock from its check to its store; the rest of the
server is moto's, unchanged.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.s3.responses import S3Response
from moto.server import main

_PUTS = threading.Lock()
_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response, *args: Any, **kwargs: Any) -> Any:
    with _PUTS:
        return _put_object(self, *args, **kwargs)


S3Response.put_object = _atomic_put_object  # type: ignore[method-assign]

if __name__ == "__main__":
    main(sys.argv[1:])
