"""The web console (``spark-log console``, spark_log/console.py) in headless Chromium driven
by Selenium (Debian's chromium and chromium-driver; ``make debian-deps`` installs them):
every page is loaded against the shared cluster and saved as a screenshot under the test's
tmp dir; the admin actions go through the page's confirmation and their effect is checked
with the admin client.  The test fails on any console error of the page (Chrome's SEVERE
log entries, a failed request among them) or an error shown on it.  Never skipped: a
missing browser is a failure."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from brokers.launcher.local import LocalCluster
from spark_log import Admin, ClientSecurity, Consumer, Producer
from spark_log.acls import CLUSTER_NAME, Operation, PatternType, ResourceType
from spark_log.console import ConsoleServer
from tests.support.secure_cluster import SecuredCluster
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "chromium and chromium-driver are needed: make debian-deps installs them"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(30)
    try:
        yield session
    finally:
        session.quit()


_STATE = ("const v = document.getElementById('view'); "
          "return v ? [v.getAttribute('data-loaded'), v.getAttribute('data-render'), "
          "document.getElementById('error') !== null] : [null, null, false];")


def _page(browser: WebDriver, url: str, name: str, shots: Path, *, ready: str) -> None:
    """Open ``url``, wait until the view has been drawn anew as ``ready`` (a fresh
    ``data-render``: a view drawn before the navigation does not count), screenshot it, check
    it.  Asking for the URL already shown is a same-document navigation that fires no
    ``hashchange``: the page is reloaded instead."""
    before = browser.execute_script(_STATE)[1]
    if browser.current_url == url:
        browser.refresh()
    else:
        browser.get(url)

    def drawn(b: WebDriver) -> bool:
        loaded, render, error = b.execute_script(_STATE)
        return error or (loaded == ready and render is not None and render != before)

    WebDriverWait(browser, 30).until(drawn, message=f"{name}: {url} was not drawn as {ready!r}")
    _check(browser, name)
    assert browser.save_screenshot(str(shots / f"{name}.png"))


def _check(browser: WebDriver, name: str) -> None:
    shown = [e.text for e in browser.find_elements(By.ID, "error")]
    assert not shown, f"{name}: the page shows an error: {shown}"
    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, f"{name}: console errors: {severe}"


def _confirm(browser: WebDriver, form: str, values: dict[str, str]) -> str:
    """Fill ``form``, submit, confirm; the page clears its status when the dialog opens and
    shows ``#done`` once the action answered and the view was drawn again.  Returns the text."""
    for field, text in values.items():
        box = browser.find_element(By.CSS_SELECTOR, f"#{form} [name={field}]")
        if box.tag_name == "select":
            browser.execute_script("arguments[0].value = arguments[1]", box, text)
        else:
            box.clear()
            box.send_keys(text)
    browser.find_element(By.CSS_SELECTOR, f"#{form} button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "confirm").is_displayed())
    assert not browser.find_elements(By.CSS_SELECTOR, "#status *"), "the status was not cleared for the action"
    browser.find_element(By.ID, "confirm-yes").click()
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.ID, "done") or b.find_elements(By.ID, "error"),
                                     message=f"{form}: the action did not finish")
    _check(browser, form)
    return browser.find_element(By.ID, "done").text


def _converges(check: Callable[[], bool], what: str) -> None:
    """The console's answer comes from the broker that applied the change; another broker applies
    the committed metadata a moment later (asynchronously, by design): wait for it, with a deadline."""
    wait_until(check, timeout=15, interval=0.05, message=what)


@contextlib.contextmanager
def _diagnosed(browser: WebDriver, console: ConsoleServer, where: Path) -> Iterator[None]:
    """On a failure, save what the page showed (source, browser log, screenshot) and the console
    server's request log under ``where`` and print their path (pytest shows it with the failure)."""
    try:
        yield
    except BaseException:
        where.mkdir(exist_ok=True)
        (where / "page.html").write_text(browser.page_source)
        (where / "browser-log.json").write_text(json.dumps(browser.get_log("browser"), indent=1))
        browser.save_screenshot(str(where / "failure.png"))
        start = console.requests[0][0] if console.requests else 0.0
        (where / "requests.txt").write_text("".join(f"{t - start:8.3f}s {m} {p} {s} {ms:.0f} ms\n"
                                                    for t, m, p, s, ms in list(console.requests)))
        print(f"console diagnostics in {where}: url {browser.current_url}")
        print((where / "requests.txt").read_text())
        raise


def test_console_pages_and_actions(cluster: LocalCluster, topic_name: str, browser: WebDriver, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    typed, made, group = f"{topic_name}-typed", f"{topic_name}-made", f"{topic_name}-g"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(typed, partitions=1, replication_factor=3,
                           schema=pa.schema([("id", pa.int64()), ("city", pa.string())]))
    with Producer(cluster.bootstrap) as producer:
        for future in producer.send_batch(typed, pa.table({"id": list(range(30)), "city": ["Lyon", "Oslo"] * 15})):
            future.result(timeout=30)
    with Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.subscribe(typed)
        seen: list[object] = []
        wait_until(lambda: seen.extend(consumer.poll(0.5)) or len(seen) >= 30, timeout=30, interval=0)
        consumer.commit({(typed, 0): 20})

    with ConsoleServer(cluster.bootstrap) as console, _diagnosed(browser, console, tmp_path / "diagnostics"):
        base = console.url
        _page(browser, base + "#cluster", "cluster", shots, ready="cluster")
        text = browser.find_element(By.ID, "view").text
        assert "Active controller" in text and text.count("live") == 3
        _assert_raft_state(browser, cluster.bootstrap, None, voters=3)

        _page(browser, base + "#topics", "topics", shots, ready="topics")
        assert typed in browser.find_element(By.ID, "view").text
        with Admin(cluster.bootstrap) as admin:  # the size column shows the leader's log on disk
            size = admin.describe_topic(typed).partitions[0].log_size_bytes
        assert size is not None and size > 0
        shown = [p for t in console.topics() if t["name"] == typed for p in t["partitions"]]
        assert shown and shown[0]["log_size_bytes"] is not None and shown[0]["log_size_bytes"] > 0
        assert "size" in [h.text for h in browser.find_elements(By.CSS_SELECTOR, "th")]
        done = _confirm(browser, "create-form", {"name": made, "partitions": "2", "replication_factor": "1"})
        assert json.loads(done) == {"created": made, "partitions": 2}
        assert made in browser.find_element(By.ID, "view").text, "the view was not drawn again after the action"
        with Admin(cluster.bootstrap) as admin:
            _converges(lambda: admin.describe_topic(made, live=False).num_partitions == 2, f"{made} not created")
        _page(browser, base + "#topics", "topics-created", shots, ready="topics")
        done = _confirm(browser, "config-form", {"topic": made, "key": "retention.ms", "value": "3600000"})
        assert json.loads(done) == {"topic": made, "config": {"retention.ms": "3600000"}}
        with Admin(cluster.bootstrap) as admin:
            _converges(lambda: admin.describe_topic(made, live=False).config["retention.ms"] == "3600000",
                       f"retention.ms of {made} not altered")

        _page(browser, base + f"#records/{typed}/0/5", "records", shots, ready="records")
        header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#view table th")]
        assert header == ["offset", "timestamp", "id", "city"]
        first = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#view table tr:nth-child(2) td")]
        assert first[0] == "5" and first[2] == "5" and first[3] == "Oslo"

        _page(browser, base + "#groups", "groups", shots, ready="groups")
        assert group in browser.find_element(By.ID, "view").text and "lag 10" in browser.find_element(By.ID, "view").text
        done = _confirm(browser, "reset-form", {"group": group, "topic": typed, "to": "earliest"})
        assert json.loads(done)["offsets"] == [[typed, 0, 0]]
        with Admin(cluster.bootstrap) as admin:
            assert admin.list_group_offsets(group)[(typed, 0)].offset == 0

        _page(browser, base + "#throughput", "throughput", shots, ready="throughput")
        with Producer(cluster.bootstrap) as producer:
            def moving() -> bool:
                producer.send_batch(typed, pa.table({"id": [1] * 50, "city": ["x"] * 50}))[0].result(timeout=30)
                rate = browser.find_element(By.ID, "rate").text
                return rate.startswith("now ") and float(rate.split()[1]) > 0

            wait_until(moving, timeout=30, interval=0.5, message="the throughput chart shows no traffic")
        _check(browser, "throughput")
        assert browser.save_screenshot(str(shots / "throughput-moving.png"))
    assert sorted(p.name for p in shots.iterdir()) == ["cluster.png", "groups.png", "records.png", "throughput-moving.png",
                                                        "throughput.png", "topics-created.png", "topics.png"]


def _assert_raft_state(browser: WebDriver, bootstrap: str, security: ClientSecurity | None, *, voters: int) -> None:
    """The cluster page shows the Raft leader and its epoch as the quorum reports them (the
    leader is the active controller the page names), and a row per voter: one leader, the
    others followers, each with a log end offset and a lag."""
    with Admin(bootstrap, security=security) as admin:
        quorum = admin.describe_quorum()
    shown = browser.find_element(By.ID, "quorum").text
    assert f"Leader: node {quorum.leader_id}" in shown and f"epoch {quorum.leader_epoch}" in shown, shown
    assert f"broker {quorum.leader_id}" in browser.find_element(By.ID, "controller").text
    rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in browser.find_elements(By.CSS_SELECTOR, "#quorum-replicas tr")[1:]]
    assert sorted(r[1] for r in rows) == ["follower"] * (voters - 1) + ["leader"], rows
    assert [r[0] for r in rows if r[1] == "leader"] == [str(quorum.leader_id)]
    assert all(r[2].isdigit() for r in rows if r[1] == "leader"), rows


def _confirm_refused(browser: WebDriver, form: str, values: dict[str, str]) -> str:
    """As ``_confirm`` for an action the cluster refuses: the page shows the error (and only
    that: no console error, no crash); returns its text."""
    for field, text in values.items():
        box = browser.find_element(By.CSS_SELECTOR, f"#{form} [name={field}]")
        box.clear()
        box.send_keys(text)
    browser.find_element(By.CSS_SELECTOR, f"#{form} button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "confirm").is_displayed())
    browser.find_element(By.ID, "confirm-yes").click()
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.ID, "done") or b.find_elements(By.ID, "error"),
                                     message=f"{form}: the action did not finish")
    assert not browser.find_elements(By.ID, "done"), f"{form}: the refused action was reported done"
    severe = [entry for entry in browser.get_log("browser")
              if entry["level"] == "SEVERE" and "status of 400" not in entry["message"]]
    assert not severe, f"{form}: console errors besides the refusal's answer: {severe}"
    return browser.find_element(By.ID, "error").text


@contextlib.contextmanager
def _console_process(bootstrap: str, *args: str) -> Iterator[str]:
    """``spark-log [args] console --port 0`` as an operator runs it; yields its URL."""
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=bootstrap)
    env.pop("SPARK_LOG_CLIENT_CONFIG", None)
    proc = subprocess.Popen([sys.executable, "-m", "spark_log.cli", *args, "console", "--port", "0"], env=env, cwd=REPO,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("spark-log console on http://127.0.0.1:"), line + proc.stderr.read()
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_console_on_a_tls_and_acl_cluster(sasl_cluster: SecuredCluster, browser: WebDriver, tmp_path: Path) -> None:
    """The console started with ``--command-config`` (a SCRAM user over TLS, as every CLI
    command takes it) shows what that principal's ACLs let it see, browses records by offset
    and by time, and shows a refused action as an error."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    tag = uuid.uuid4().hex[:6]
    visible, hidden, user = f"console-sec-{tag}", f"console-hidden-{tag}", f"console-ops-{tag}"
    base_ms = 1_700_000_000_000          # 2023-11-14T22:13:20Z; record i at base + i s
    with sasl_cluster.admin() as admin:
        admin.create_topic(visible, partitions=1, replication_factor=3)
        admin.create_topic(hidden, partitions=1, replication_factor=3)
    with Producer(sasl_cluster.bootstrap, security=sasl_cluster.admin_security) as producer:
        for i in range(10):
            producer.send(visible, f"v{i}", key=f"k{i}", timestamp=base_ms + i * 1000)
        producer.flush()
    password = uuid.uuid4().hex
    sasl_cluster.user(user, password)
    sasl_cluster.allow(f"User:{user}", ResourceType.TOPIC, "console-sec-", Operation.DESCRIBE, Operation.READ,
                       pattern=PatternType.PREFIXED)
    properties = tmp_path / "console.properties"
    properties.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={sasl_cluster.ca_file}\n"
                          f"sasl.mechanism=SCRAM-SHA-256\nsasl.username={user}\nsasl.password={password}\n")

    with _console_process(sasl_cluster.bootstrap, "--command-config", str(properties)) as base:
        _page(browser, base + "#cluster", "secure-cluster", shots, ready="cluster")
        assert browser.find_element(By.ID, "view").text.count("live") == 3
        # the Raft state needs DESCRIBE on the cluster: without it the page says so, and the rest shows
        refused_quorum = browser.find_element(By.ID, "quorum-unavailable").text
        assert "CLUSTER_AUTHORIZATION_FAILED" in refused_quorum, refused_quorum
        sasl_cluster.allow(f"User:{user}", ResourceType.CLUSTER, CLUSTER_NAME, Operation.DESCRIBE)
        _page(browser, base + "#cluster", "secure-cluster-raft", shots, ready="cluster")
        _assert_raft_state(browser, sasl_cluster.bootstrap, sasl_cluster.admin_security, voters=3)

        _page(browser, base + "#topics", "secure-topics", shots, ready="topics")
        text = browser.find_element(By.ID, "view").text
        assert visible in text and hidden not in text, "the topics page shows what the user may DESCRIBE, only"

        _page(browser, base + f"#records/{visible}/0/3", "secure-records", shots, ready="records")
        first = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#view table tr:nth-child(2) td")]
        assert first[0] == "3" and first[1] == "2023-11-14T22:13:23.000Z" and first[-1] == "v3", first

        # from a time, through the page's form: the first record at or after 22:13:25.5 is offset 6
        before = browser.execute_script(_STATE)[1]
        box = browser.find_element(By.CSS_SELECTOR, "#seek-form [name=time]")
        browser.execute_script("arguments[0].value = arguments[1]", box, "2023-11-14T22:13:25.500")
        assert box.get_attribute("value") in ("2023-11-14T22:13:25.500", "2023-11-14T22:13:25.5"), "the field took it"
        browser.find_element(By.CSS_SELECTOR, "#seek-form button[type=submit]").click()
        WebDriverWait(browser, 30).until(lambda b: b.execute_script(_STATE)[1] not in (None, before)
                                         or b.find_elements(By.ID, "error"))
        _check(browser, "secure-records-by-time")
        assert browser.current_url.endswith(f"#records/{visible}/0/time/{base_ms + 5500}")
        assert "(offset 6)" in browser.find_element(By.ID, "records-from").text
        rows = browser.find_elements(By.CSS_SELECTOR, "#view table tr")
        assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows[1:]] == ["6", "7", "8", "9"]
        assert browser.save_screenshot(str(shots / "secure-records-by-time.png"))

        # not allowed to create topics: the page shows the refusal
        _page(browser, base + "#topics", "secure-topics-again", shots, ready="topics")
        refused = _confirm_refused(browser, "create-form", {"name": f"console-sec-new-{tag}", "partitions": "1",
                                                            "replication_factor": "1"})
        assert "AUTHORIZATION" in refused.upper(), refused
        assert browser.save_screenshot(str(shots / "secure-refused.png"))
    with sasl_cluster.admin() as admin:
        assert f"console-sec-new-{tag}" not in admin.list_topics()


def test_console_command_serves_the_page(cluster: LocalCluster) -> None:
    """``spark-log console --port 0`` prints where it serves and answers the page and the API."""
    import os
    import urllib.request

    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=cluster.bootstrap)
    proc = subprocess.Popen([sys.executable, "-m", "spark_log.cli", "console", "--port", "0"], env=env, cwd=REPO,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("spark-log console on http://127.0.0.1:"), line
        url = line.split()[-1]
        with urllib.request.urlopen(url, timeout=10) as page:
            assert b"spark-log console" in page.read()
        with urllib.request.urlopen(url + "api/cluster", timeout=10) as answer:
            assert b'"brokers"' in answer.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("path,body", [
    ("api/topics", {"name": "console-bad-config", "config": [1]}),
    ("api/topics", {"name": "console-bad-count", "partitions": [1]}),
    ("api/topics", {"name": "console-bad-count", "partitions": "two"}),
    ("api/config", {"topic": "any", "set": "retention.ms=1"}),
])
def test_console_answers_a_body_of_the_wrong_shape_with_400(cluster: LocalCluster, path: str,
                                                           body: dict[str, object]) -> None:
    """A POST whose fields have the wrong JSON types is a 400 with the reason (an uncaught
    AttributeError left the request without any answer), and changes nothing."""
    import urllib.error
    import urllib.request

    with ConsoleServer(cluster.bootstrap) as console:
        request = urllib.request.Request(console.url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 400
        assert "must be" in json.loads(refused.value.read())["error"]
        assert not any(t.startswith("console-bad") for t in console.admin.list_topics())
