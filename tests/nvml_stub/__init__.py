"""A fake ``libnvidia-ml.so.1`` (C, built with gcc) that lets tests run the real pynvml without a GPU."""
