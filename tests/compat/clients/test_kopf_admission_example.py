"""kopf's own admission example (``examples/17-admission``), unchanged, against ``setpoint serve``.

The example, kopf's demo CRD and object are vendored unchanged in tests/compat/kopf_examples
(README there). kopf starts a local HTTPS webhook server with a self-signed certificate
(``WebhookAutoServer``: it finds no K3d or Minikube behind the API server's certificate) and
registers the ValidatingWebhookConfiguration and MutatingWebhookConfiguration
``auto.kopf.dev`` itself, with the certificate as their ``caBundle``.

:func:`test_kopf_e2e_check_of_the_admission_example` repeats the steps and assertions of
kopf's ``tests/e2e/test_examples.py`` for this example (kopf's check needs ``astpath`` and
its own fixtures, so it is restated here rather than imported): the CRD applied, the operator
run with ``kopf run --all-namespaces --standalone --verbose``, ``examples/obj.yaml``
applied and deleted with kubectl, then: no exception, exit code 0, no traceback, the
``E2E_SUCCESS_COUNTS`` the example declares, no handler failed. The stop-word sleeps of
kopf's test are replaced by positive signals. kopf's check says little about admission
itself, so :func:`test_the_admission_example_validates_and_mutates` checks what each of the
example's handlers means, through kubectl.

Both need kopf's ``dev`` extras (certbuilder, certvalidator and an oscrypto that reads
OpenSSL 3.0.10+ version strings; ``make install`` installs them) and skip without them.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.clients.conftest import http
from tests.compat.clients.test_kopf import collect_sockets_left_in_tls_shutdown
from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess

kopf = pytest.importorskip("kopf", reason="kopf is not installed")

from kopf._core.intents import registries  # noqa: E402
from kopf.testing import KopfRunner  # noqa: E402

pytestmark = [pytest.mark.compat, pytest.mark.slow]

EXAMPLES = Path(__file__).parent.parent / "kopf_examples" / "examples"
EXAMPLE = EXAMPLES / "17-admission" / "example.py"
THINGS = "/apis/kopf.dev/v1/namespaces/default/kopfexamples"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/auto.kopf.dev"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/auto.kopf.dev"
MERGE = "application/merge-patch+json"


def require_certificate_tools() -> None:
    """Skip unless kopf can make its self-signed certificate and guess the cluster's kind."""
    for name in ("certbuilder", "certvalidator"):
        pytest.importorskip(name, reason=f"kopf[dev]'s {name} is not installed")
    try:
        import oscrypto.asymmetric  # noqa: F401
    except Exception as e:  # oscrypto 1.3.0 raises LibraryNotFoundError on OpenSSL 3.0.10+
        pytest.skip(f"oscrypto cannot load OpenSSL here: {e}", allow_module_level=True)


require_certificate_tools()


class E2EConfig:
    """What kopf's ``E2EParser`` reads from an example, read with :mod:`ast` alone: its
    ``E2E_*`` constants and which ``@kopf.on.*`` decorators it uses."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text())
        self.configs: dict[str, Any] = {}
        self.handlers: set[str] = set()
        self.optional_deletes: list[bool] = []
        for node in ast.walk(tree):
            target = node.target if isinstance(node, ast.AnnAssign) else (
                node.targets[0] if isinstance(node, ast.Assign) else None)
            if isinstance(target, ast.Name) and target.id.startswith("E2E_"):
                assert isinstance(node, ast.Assign | ast.AnnAssign)
                assert node.value is not None
                self.configs[target.id] = ast.literal_eval(node.value)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute):
                        self.handlers.add(deco.func.attr)
                        if deco.func.attr == "delete":
                            self.optional_deletes += [ast.literal_eval(k.value)
                                                      for k in deco.keywords
                                                      if k.arg == "optional"]

    @property
    def has_changing_handlers(self) -> bool:
        return bool(self.handlers & {"create", "update", "delete"})

    @property
    def has_mandatory_on_delete(self) -> bool:
        return "delete" in self.handlers and not any(self.optional_deletes)


@pytest.fixture
def operator_env(serve: ServeProcess, kubectl: Kubectl,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kopf's e2e fixtures: the example CRD applied (``with_crd``), a fresh default registry
    for the example's handlers (``registry_factory``), the server's kubeconfig."""
    monkeypatch.setenv("KUBECONFIG", str(serve.kubeconfig))
    with contextlib.suppress(ImportError):
        # kopf logs in through the kubernetes client, which read $KUBECONFIG when imported
        from kubernetes.config import kube_config
        monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(serve.kubeconfig))
    kubectl.apply(EXAMPLES / "crd.yaml")
    eventually(lambda: http(serve, "GET", THINGS)[0] == 200)
    previous = registries.get_default_registry()
    registries.set_default_registry(registries.SmartOperatorRegistry())
    try:
        yield
    finally:
        registries.set_default_registry(previous)


@contextlib.contextmanager
def run_example() -> Iterator[KopfRunner]:
    """The operator as kopf's e2e test runs it, with its settings."""
    settings = kopf.OperatorSettings()
    settings.execution.default_backoff = 1
    settings.watching.server_timeout = 10
    with KopfRunner(["run", "--all-namespaces", "--standalone", "--verbose", str(EXAMPLE)],
                    timeout=60, settings=settings) as runner:
        yield runner
    collect_sockets_left_in_tls_shutdown()


def probe(name: str, field: str, *, labelled: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labelled:
        meta["labels"] = {"somelabel": "somevalue"}
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": meta,
            "spec": {"field": field}}


def webhooks_serve(kubectl: Kubectl) -> bool:
    """Positive signal that kopf's webhooks are registered and in force: a server-side
    dry-run create is mutated by ``mutate1`` and warned about by ``authhook`` (a validating
    webhook). Nothing is refused: a refusal would count as a failed handler in kopf's check."""
    result = kubectl.run("create", "--dry-run=server", "-o", "json", "-f", "-",
                         input=json.dumps(probe("probe", "value", labelled=True)))
    assert json.loads(result.stdout)["spec"].get("injected") == 123
    assert "Warning: Accessing as user-agent:" in result.stderr
    return True


def test_kopf_e2e_check_of_the_admission_example(
        serve: ServeProcess, kubectl: Kubectl, operator_env: None) -> None:
    e2e = E2EConfig(EXAMPLE)
    with run_example() as runner:
        eventually(lambda: webhooks_serve(kubectl), timeout=60)
        kubectl.apply(EXAMPLES / "obj.yaml")
        created = kubectl.json("get", "-f", str(EXAMPLES / "obj.yaml"))
        kubectl.run("delete", "-f", str(EXAMPLES / "obj.yaml"))
        eventually(lambda: http(serve, "GET", f"{THINGS}/kopf-example-1")[0] == 404)
    # on its way out kopf takes its webhooks out of the configurations it manages
    assert http(serve, "GET", VALIDATING)[1].get("webhooks") in (None, [])
    assert http(serve, "GET", MUTATING)[1].get("webhooks") in (None, [])
    assert created["spec"]["injected"] == 123

    # kopf's assertions, in its order
    assert runner.exception is None
    assert runner.exit_code == 0
    if e2e.has_mandatory_on_delete:
        assert "[default/kopf-example-1] Adding the finalizer" in runner.output
    if "create" in e2e.handlers:
        assert "[default/kopf-example-1] Creation is in progress:" in runner.output
    if e2e.has_mandatory_on_delete:
        assert "[default/kopf-example-1] Deletion is in progress:" in runner.output
    if e2e.has_changing_handlers:
        assert "[default/kopf-example-1] Deleted, really deleted" in runner.output
    if not e2e.configs.get("E2E_ALLOW_TRACEBACKS"):
        assert "Traceback (most recent call last):" not in runner.output
    succeeded = re.findall(r"'(.+?)' succeeded", runner.output)
    success_counts = e2e.configs.get("E2E_SUCCESS_COUNTS")
    if success_counts is not None:
        assert collections.Counter(n for n in succeeded if n in success_counts) \
            == success_counts
    else:
        assert set(collections.Counter(succeeded).values()) == {1}
    failed = re.findall(r"'(.+?)' failed (?:permanently|with an exception and will stop)",
                        runner.output)
    failure_counts = e2e.configs.get("E2E_FAILURE_COUNTS")
    if failure_counts is not None:
        assert collections.Counter(n for n in failed if n in failure_counts) \
            == failure_counts
    else:
        assert not failed
    # what the run shows beyond kopf's check: every webhook of the example was called
    for name in ("authhook", "validate1", "validate_subresources", "mutate1"):
        assert f"Webhook {name!r} succeeded" in runner.output, name


def kubectl_patch(kubectl: Kubectl, patch: dict[str, Any], *extra: str
                  ) -> tuple[int, str]:
    result = kubectl.run("patch", "kex", "kopf-example-1", "--type", "merge", "-p",
                         json.dumps(patch), *extra, check=False)
    return result.returncode, result.stderr


def test_the_admission_example_validates_and_mutates(
        serve: ServeProcess, kubectl: Kubectl, operator_env: None) -> None:
    with run_example() as runner:
        eventually(lambda: webhooks_serve(kubectl), timeout=60)
        applied = kubectl.run("apply", "-f", str(EXAMPLES / "obj.yaml"))
        # mutate1 (labels somelabel=somevalue) injects spec.injected
        obj = kubectl.json("get", "kex", "kopf-example-1")
        assert obj["spec"]["injected"] == 123
        # authhook's and validate_subresources' warnings reach kubectl; kopf sees the
        # API server's User-Agent and no client certificate
        assert applied.stderr.splitlines() == [
            "Warning: Accessing as user-agent: kube-apiserver-admission",
            "Warning: SSL peer is not identified.",
            "Warning: Also update status.field to match spec.field: 'value' != None"]
        # validate1 refuses field: wrong, but not in a dry run
        code, err = kubectl_patch(kubectl, {"spec": {"field": "wrong"}})
        assert code == 1
        assert err.strip().endswith('admission webhook "validate1.auto.kopf.dev" denied '
                                    "the request: Meh! I don't like it. Change the field.")
        code, err = kubectl_patch(kubectl, {"spec": {"field": "wrong"}}, "--dry-run=server")
        assert code == 0, err
        # validate2 (field filter spec.field=not-allowed) refuses with its own code, 555
        status, body = http(serve, "PATCH", f"{THINGS}/kopf-example-1",
                            {"spec": {"field": "not-allowed"}}, content_type=MERGE)
        assert status == 555, body
        assert body["message"] == ('admission webhook "validate2.spec.field.auto.kopf.dev" '
                                   "denied the request: I'm too lazy anyway. Go away!")
        # validate_subresources checks writes to the status subresource
        code, err = kubectl_patch(kubectl, {"status": {"field": "other"}},
                                  "--subresource", "status")
        assert code == 1
        assert err.strip().endswith("status.field MUST be equal to spec.field!")
        code, err = kubectl_patch(kubectl, {"status": {"field": "value"}},
                                  "--subresource", "status")
        assert code == 0, err
        # an object without the label is not mutated
        status, body = http(serve, "POST", THINGS, probe("plain", "value", labelled=False))
        assert status == 201, body
        assert "injected" not in body["spec"]
        assert http(serve, "GET", f"{THINGS}/kopf-example-1")[1]["spec"]["field"] == "value"
        kubectl.run("delete", "kex", "kopf-example-1", "plain")
    assert runner.exception is None
    assert runner.exit_code == 0
    assert "Traceback" not in runner.output
    assert "Webhook 'validate1' failed permanently: Meh!" in runner.output
