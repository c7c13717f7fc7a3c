"""The engine: meaning without I/O. One decoded request in, one typed outcome out."""
