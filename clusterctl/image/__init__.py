"""Images: build with the Docker engine, save to and load from tarballs."""
