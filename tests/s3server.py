"""A real S3-compatible server for tests: moto's standalone server (werkzeug, threaded) in this process, on an
address the caller picks (a test cluster's own subnet, say), with one bucket; optionally slow on chosen writes.

``slow_put`` delays the PUTs whose key matches a pattern before moto handles them (a store whose PUT takes that
long to land): how the run lock's race window is made wide enough to see without waiting for a slow network.
"""

from __future__ import annotations

import re
import threading
import time

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


class S3Server:
    """Args: ``host`` to listen on, ``bucket`` to create, ``slow_put`` = (key regex, seconds) or None."""

    def __init__(self, host: str = "127.0.0.1", bucket: str = "filegram",
                 slow_put: tuple[str, float] | None = None):
        self.host, self.bucket = host, bucket
        app = DomainDispatcherApplication(create_backend_app)
        if slow_put:
            pattern, delay = re.compile(slow_put[0]), slow_put[1]

            def wsgi(environ, start_response):
                if environ.get("REQUEST_METHOD") == "PUT" and pattern.search(environ.get("PATH_INFO", "")):
                    time.sleep(delay)
                return app(environ, start_response)
        else:
            wsgi = app
        self._server = make_server(host, 0, wsgi, threaded=True, request_handler=MotoRequestHandler)
        self.port = self._server.server_address[1]
        self.endpoint = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-s3", daemon=True)

    @property
    def storage_options(self) -> dict:
        """The fsspec (s3fs) options that reach this server."""
        return {"endpoint_url": self.endpoint, "key": "test", "secret": "test",
                "client_kwargs": {"region_name": "us-east-1"}}

    def __enter__(self) -> S3Server:
        self._thread.start()
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket=self.bucket)
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
