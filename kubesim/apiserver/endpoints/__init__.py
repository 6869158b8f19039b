"""The HTTP side of the API server: routes, wire format, printers, OpenAPI, streams, proxy."""
