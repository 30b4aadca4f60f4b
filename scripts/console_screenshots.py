"""Screenshots of the web console's pages for docs/console.md: a broker on free loopback
ports, real clients of each protocol writing and reading, Debian's headless chromium.

Run from the repository root: python scripts/console_screenshots.py [--out docs/console]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.observe.metrics_support import (  # noqa: E402
    all_protocols_config,
    amqp_channel,
    amqp_consume,
    amqp_produce,
    kafka_consume,
    metrics_url,
    remoting_produce,
    stomp_consume,
    stomp_produce,
)
from tests.support.live_broker import start_live_broker  # noqa: E402

PAGES = [("overview", "overview", "#/overview"), ("topics", "topics", "#/topics"),
         ("topic", "topics", "#/topics/orders"), ("groups", "groups", "#/groups"),
         ("group", "groups", "#/groups/billing"), ("connections", "connections", "#/connections"),
         ("messages", "messages", "#/messages?by=key&topic=orders&key=order-42"), ("amqp", "amqp", "#/amqp")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="docs/console")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        live = start_live_broker(all_protocols_config(os.path.join(work, "store")))
        kafka = Consumer({"bootstrap.servers": live.bootstrap, "group.id": "billing",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
        options = Options()
        options.binary_location = "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                         f"--user-data-dir={os.path.join(work, 'chromium')}"):
            options.add_argument(argument)
        driver = None
        connection = None
        try:
            producer = Producer({"bootstrap.servers": live.bootstrap, "linger.ms": 5})
            for i in range(120):
                producer.produce("orders", b'{"order": %d, "total": %d.50}' % (i, i * 3), key=b"order-%d" % i,
                                 headers={"source": b"web"})
            assert producer.flush(20) == 0
            kafka_consume(live, "orders", "billing", 100)
            kafka.subscribe(["orders"])  # a member over Kafka, 20 behind
            for _ in range(20):
                kafka.poll(0.2)
            amqp_produce(live, "emails", 40)
            amqp_consume(live, "emails", 25)
            stomp_produce(live, "/queue/audit", 30)
            stomp_consume(live, "/queue/audit", 30, **{"x-group": "auditors"})
            remoting_produce(live, "payments", 12)
            connection, channel = amqp_channel(live)
            channel.exchange_declare("notifications", "topic", durable=True)
            channel.queue_bind("emails", "notifications", "email.#")
            channel.basic_qos(prefetch_count=5)
            channel.basic_consume("emails", lambda *a: None)
            connection.process_data_events(time_limit=0.2)
            stop = threading.Event()

            def trickle() -> None:  # something for the live charts to draw
                i = 0
                while not stop.wait(0.05 if i % 40 < 20 else 0.15):
                    producer.produce("orders", b'{"order": "live-%d"}' % i, key=b"live-%d" % i)
                    producer.poll(0)
                    i += 1
            threading.Thread(target=trickle, daemon=True).start()
            driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
            for name, page, route in PAGES:
                driver.get(metrics_url(live, "/" + route))
                WebDriverWait(driver, 20).until(
                    lambda d, page=page: d.find_element(By.ID, "page").get_attribute("data-page") == page)
                if name in ("overview", "groups", "group"):
                    time.sleep(9)  # a few points on the live chart
                driver.save_screenshot(os.path.join(args.out, f"{name}.png"))
                print(os.path.join(args.out, f"{name}.png"))
            stop.set()
        finally:
            if driver is not None:
                driver.quit()
            if connection is not None:
                connection.close()
            kafka.close()
            live.stop()


if __name__ == "__main__":
    main()
