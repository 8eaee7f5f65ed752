# The kbatch image: `kbatch run` (the scheduler, its operators and webhooks).
#
#   docker build -t kbatch/kbatch:0.1.0 .
#
# The Helm chart's default image is kbatch/kbatch:<appVersion>
# (charts/kbatch/values.yaml, Chart.yaml); tests/chart/test_dockerfile.py keeps
# the two in step. The base is pinned to an exact Python release.

FROM python:3.11.9-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kbatch
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY kbatch ./kbatch
COPY operators ./operators
COPY webhooks ./webhooks
RUN /opt/kbatch/bin/pip install .

FROM python:3.11.9-slim-bookworm
LABEL org.opencontainers.image.title="kbatch" \
      org.opencontainers.image.description="A batch scheduler for Kubernetes (kube-batch compatible)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/kbatch/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/kbatch /opt/kbatch
RUN groupadd --system --gid 10001 kbatch \
    && useradd --system --uid 10001 --gid kbatch --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kbatch
USER 10001:10001
EXPOSE 8080 8081 9443
ENTRYPOINT ["kbatch", "run"]
