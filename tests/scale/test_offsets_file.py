"""The committed-offsets file with many groups and queues: each save encodes again only the
topic@group parts whose offsets changed, so the file must stay exactly what encoding the
whole table gives, whichever way the table changed between saves (commits, metadata,
a topic removed, a slave writing its master's table straight into it)."""

from __future__ import annotations

import json
import random

from rocketport.core.metadata.offsets import ConsumerOffsetManager


def _on_disk(path) -> tuple[str, dict]:
    text = (path / "consumerOffset.json").read_text()
    return text, json.loads(text)


def _expected(m: ConsumerOffsetManager) -> str:
    data: dict = {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in m.table.items()}}
    metadata = {k: {str(q): s for q, s in v.items()} for k, v in m.metadata.items() if v}
    if metadata:
        data["metadataTable"] = metadata
    return json.dumps(data, indent=1, sort_keys=True)


def test_every_save_writes_the_whole_table_after_any_change(tmp_path):
    rng = random.Random(40)
    m = ConsumerOffsetManager(str(tmp_path))
    topics = [f"t-{i}" for i in range(30)]
    for step in range(40):
        for _ in range(rng.randrange(1, 20)):  # commits, some with metadata, queue ids past 9
            m.commit(rng.choice("gh"), rng.choice(topics), rng.randrange(12), rng.randrange(1000),
                     rng.choice([None, "", "m\u00e9ta"]))
        if step % 7 == 3:
            m.remove_topic(rng.choice(topics))
        if step % 5 == 4 and m.table:  # as a slave applies its master's table: no commit() call
            key = rng.choice(sorted(m.table))
            m.table[key][rng.randrange(12)] = rng.randrange(1000)
            m.version += 1
        if step % 11 == 10 and m.table:
            m.table.pop(rng.choice(sorted(m.table)))
            m.version += 1
        m.persist()
        text, data = _on_disk(tmp_path)
        assert text == _expected(m)
        loaded = ConsumerOffsetManager(str(tmp_path))
        loaded.load()
        assert loaded.table == m.table
        assert {k: v for k, v in loaded.metadata.items() if v} == {k: v for k, v in m.metadata.items() if v}
    for topic in topics:
        m.remove_topic(topic)
    m.persist()
    assert _on_disk(tmp_path) == (_expected(m), {"offsetTable": {}})
