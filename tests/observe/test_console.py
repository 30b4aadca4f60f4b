"""The web console in a real headless Chromium (Debian's chromium and chromedriver, driven
by selenium) against a live broker that real clients wrote to: a topic made over Kafka, a
Kafka group and an AMQP queue group with their lag side by side (the AMQP one with its
connected consumer as a member), a message looked up by key showing its body, and broker
data that is hostile HTML (a Kafka group name, a message key and body) shown as text; the
actions (create a topic, send a test message, reset a group by time), each confirmed."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.observe.metrics_support import (
    TIMEOUT,
    all_protocols_config,
    amqp_channel,
    amqp_consume,
    amqp_produce,
    kafka_consume,
    metrics_url,
    remoting_produce,
    stomp_produce,
)
from tests.support.live_broker import LiveBroker, start_live_broker

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HOSTILE_GROUP = '<img src=x onerror="document.title=\'owned\'">'
HOSTILE_KEY = "<script>document.title='owned'</script>"
HOSTILE_BODY = '<b id="injected">bold?</b>'


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveBroker]:
    broker = start_live_broker(all_protocols_config(str(tmp_path_factory.mktemp("console") / "store")))
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(10):  # ConsoleT is made by this first produce (auto-create)
            producer.produce("ConsoleT", b"hello %d" % i, key=b"key-%d" % i)
        producer.produce("ConsoleT", HOSTILE_BODY.encode(), key=HOSTILE_KEY.encode())
        assert producer.flush(TIMEOUT) == 0
        kafka_consume(broker, "ConsoleT", "ConsoleG", 11)
        producer.produce("ConsoleT", b"late")
        assert producer.flush(TIMEOUT) == 0  # ConsoleG: lag 1
        kafka_consume(broker, "ConsoleT", HOSTILE_GROUP, 12)
        amqp_produce(broker, "console.q", 7)
        amqp_consume(broker, "console.q", 3)  # the queue's group: lag 4
        stomp_produce(broker, "/queue/ConsoleMixed", 2)  # one topic, two protocols
        remoting_produce(broker, "ConsoleMixed", 1)
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(TIMEOUT)
        yield driver
    finally:
        driver.quit()


def open_page(browser: WebDriver, live: LiveBroker, hash_: str, page: str) -> None:
    browser.get(metrics_url(live, "/#/" + hash_))
    WebDriverWait(browser, TIMEOUT).until(
        lambda d: d.find_element(By.ID, "page").get_attribute("data-page") == page)


def wait_text(browser: WebDriver, css: str, text: str) -> None:
    """Until an element matching ``css`` shows exactly ``text`` (pages refresh themselves)."""
    WebDriverWait(browser, TIMEOUT).until(
        lambda d: any(e.text == text for e in d.find_elements(By.CSS_SELECTOR, css)),
        f"no {css} showing {text!r}")


def row_of(browser: WebDriver, name: str) -> dict[str, str]:
    """The table row whose first cell reads ``name``, as column key -> text."""
    for row in browser.find_elements(By.CSS_SELECTOR, "#page tbody tr"):
        cells = row.find_elements(By.TAG_NAME, "td")
        if cells and cells[0].text == name:
            return {c.get_attribute("data-col"): c.text for c in cells if c.get_attribute("data-col")}
    raise AssertionError(f"no row {name!r}")


def severe_logs(browser: WebDriver) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def test_overview_and_a_topic_made_over_kafka(live, browser):
    open_page(browser, live, "overview", "overview")
    assert browser.find_element(By.CSS_SELECTOR, '[data-card="broker"] .value').text == "broker-a (id 0)"
    assert browser.find_element(By.CSS_SELECTOR, '[data-card="role"] .value').text == "ASYNC_MASTER"
    assert row_of(browser, "kafka")["in"] == "12"
    assert row_of(browser, "amqp")["in"] == "7"
    open_page(browser, live, "topics", "topics")
    assert row_of(browser, "ConsoleT")["messages"] == "12"
    # which protocols wrote each topic
    assert row_of(browser, "ConsoleT")["writtenBy"] == "kafka"
    assert row_of(browser, "console.q")["writtenBy"] == "amqp"
    assert sorted(row_of(browser, "ConsoleMixed")["writtenBy"].split()) == ["remoting", "stomp"]
    browser.find_element(By.LINK_TEXT, "ConsoleT").click()
    wait_text(browser, "#page h1 .name", "ConsoleT")
    assert browser.find_element(By.CSS_SELECTOR, '[data-card="writtenBy"] .value').text == "kafka"
    offsets = [int(e.text) for e in browser.find_elements(By.CSS_SELECTOR, '#page td[data-col="maxOffset"]')]
    assert len(offsets) == 4 and sum(offsets) == 12  # auto-created: four queues
    assert severe_logs(browser) == []


def test_groups_lag_side_by_side_with_their_members(live, browser):
    connection, channel = amqp_channel(live)
    try:  # a consumer that holds one delivery unacknowledged: a member, the lag unchanged
        channel.basic_qos(prefetch_count=1)
        channel.basic_consume("console.q", lambda *args: None)
        connection.process_data_events(time_limit=0.2)
        open_page(browser, live, "groups", "groups")
        kafka, amqp = row_of(browser, "ConsoleG"), row_of(browser, "console.q")
        assert kafka["lag"] == "1" and amqp["lag"] == "4"
        # the lag chart: a line per group furthest behind, each named with its lag now
        wait_text(browser, "#page .legend span", "console.q 4")
        wait_text(browser, "#page .legend span", "ConsoleG 1")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#page svg.chart polyline")) >= 2
        assert amqp["amqp"] == "1" and kafka["kafka"] == ""  # the Kafka consumer has closed
        browser.find_element(By.LINK_TEXT, "console.q").click()
        wait_text(browser, '[data-card="lag"] .value', "4")
        assert row_of(browser, "amqp")["address"].startswith("127.0.0.1:")
        assert browser.find_element(By.CSS_SELECTOR, '[data-card="unacked"] .value').text == "1"
    finally:
        connection.close()
    # the page refreshes itself: the member leaves, its delivery goes back to ready
    wait_text(browser, '[data-card="members"] .value', "0")
    assert browser.find_element(By.CSS_SELECTOR, '[data-card="lag"] .value').text == "4"


def test_message_looked_up_by_key_shows_its_body(live, browser):
    open_page(browser, live, "messages?topic=ConsoleT&key=key-3", "messages")
    body = browser.find_element(By.CSS_SELECTOR, "#results pre.body")
    assert body.text == "hello 3" and body.get_attribute("data-encoding") == "text"
    assert browser.find_element(By.CSS_SELECTOR, '#results [data-card="keys"] .value').text == "key-3"
    # the same through the form, as a user types it
    open_page(browser, live, "messages", "messages")
    browser.find_element(By.NAME, "topic").send_keys("ConsoleT")
    browser.find_element(By.NAME, "key").send_keys("key-7")
    browser.find_element(By.CSS_SELECTOR, "form.lookup button").click()
    wait_text(browser, "#results pre.body", "hello 7")


def test_amqp_exchanges_queues_and_bindings(live, browser):
    connection, channel = amqp_channel(live)
    try:
        channel.exchange_declare("console.x", "topic", durable=True)
        channel.queue_bind("console.q", "console.x", "orders.#")
    finally:
        connection.close()
    open_page(browser, live, "amqp", "amqp")
    assert row_of(browser, "console.x")  # the exchange's row
    queue = row_of(browser, "console.q")
    assert queue["ready"] == "4" and queue["consumers"] == "0"
    assert "console.x → orders.#" in queue["bindings"].splitlines()


def test_hostile_broker_data_is_shown_as_text(live, browser):
    open_page(browser, live, "groups", "groups")
    assert row_of(browser, HOSTILE_GROUP)["lag"] == "0"
    browser.find_element(By.LINK_TEXT, HOSTILE_GROUP).click()
    wait_text(browser, "#page h1 .name", HOSTILE_GROUP)
    open_page(browser, live, "messages?topic=ConsoleT&key=" + urllib.request.quote(HOSTILE_KEY), "messages")
    assert browser.find_element(By.CSS_SELECTOR, '#results [data-card="keys"] .value').text == HOSTILE_KEY
    assert browser.find_element(By.CSS_SELECTOR, "#results pre.body").text == HOSTILE_BODY
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert browser.find_elements(By.ID, "injected") == []
    assert browser.find_elements(By.CSS_SELECTOR, "#page script") == []
    assert browser.title == "Rocketport console"


def test_the_page_ships_with_the_broker_and_a_strict_policy(live):
    with urllib.request.urlopen(metrics_url(live, "/"), timeout=TIMEOUT) as answer:
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in answer.headers["content-security-policy"]
        page = answer.read().decode()
    assert 'src="/console/main.js"' in page and "://" not in page  # nothing from the internet
    with urllib.request.urlopen(metrics_url(live, "/console/pages.js"), timeout=TIMEOUT) as answer:
        assert answer.headers["content-type"] == "text/javascript; charset=utf-8"


def confirm(browser: WebDriver, accept: bool, mentions: str) -> None:
    alert = WebDriverWait(browser, TIMEOUT).until(expected_conditions.alert_is_present())
    assert mentions in alert.text, alert.text
    alert.accept() if accept else alert.dismiss()


def test_actions_each_confirmed_first(live, browser):
    """Create a topic (declined once, then accepted), send a test message to it and look it
    up, reset a group's offsets to a time before its topic began."""
    open_page(browser, live, "topics", "topics")
    form = browser.find_element(By.CSS_SELECTOR, 'form[data-action="Create or update"]')
    form.find_element(By.NAME, "topic").send_keys("MadeInConsole")
    form.find_element(By.NAME, "readQueueNums").send_keys("2")
    form.find_element(By.NAME, "writeQueueNums").send_keys("2")
    form.find_element(By.TAG_NAME, "button").click()
    confirm(browser, False, "MadeInConsole")  # declined: nothing is made
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(metrics_url(live, "/api/topics/MadeInConsole"), timeout=TIMEOUT)
    form.find_element(By.TAG_NAME, "button").click()
    confirm(browser, True, "MadeInConsole")
    wait_text(browser, 'p[data-action="Create or update"]', "Topic MadeInConsole has 2 read and 2 write queues.")

    browser.find_element(By.LINK_TEXT, "MadeInConsole").click()
    wait_text(browser, "#page h1 .name", "MadeInConsole")
    form = browser.find_element(By.CSS_SELECTOR, 'form[data-action="Send"]')
    form.find_element(By.NAME, "keys").send_keys("made-key")
    form.find_element(By.NAME, "body").send_keys("sent from the console")
    form.find_element(By.TAG_NAME, "button").click()
    confirm(browser, True, "MadeInConsole")
    WebDriverWait(browser, TIMEOUT).until(lambda d: d.find_elements(By.LINK_TEXT, "look it up"))
    browser.find_element(By.LINK_TEXT, "look it up").click()
    wait_text(browser, "#results pre.body", "sent from the console")

    open_page(browser, live, "groups/ConsoleG", "groups")
    wait_text(browser, '[data-card="lag"] .value', "1")
    form = browser.find_element(By.CSS_SELECTOR, 'form[data-action="Reset offsets"]')
    browser.execute_script("arguments[0].value = '2000-01-01T00:00:00'", form.find_element(By.NAME, "time"))
    form.find_element(By.TAG_NAME, "button").click()
    confirm(browser, True, "ConsoleG")
    WebDriverWait(browser, TIMEOUT).until(
        lambda d: d.find_element(By.CSS_SELECTOR, 'p[data-action="Reset offsets"]').text.startswith("Committed"))
    wait_text(browser, '[data-card="lag"] .value', "12")  # back to the topic's first messages
