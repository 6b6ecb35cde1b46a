"""logs/batch_write.py, logs/records.py and LineFormatter: the TaskManager's cheaper log path
writes the same lines to the same files as the logging module's own, one record at a time."""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
import time
from pathlib import Path

import pytest

from flink_runtime.logs.batch_write import write_batch
from flink_runtime.logs.context import LineFormatter
from flink_runtime.logs.records import RecordTemplate

FORMAT = "%(asctime)s %(levelname)-5s %(name)s %(message)s"


def records(count: int) -> list[logging.LogRecord]:
    made = []
    for n in range(count):
        level = logging.WARNING if n % 7 == 0 else logging.INFO
        # Lines of different lengths, some not ASCII: rollovers fall at different places.
        record = logging.LogRecord("test.batch", level, __file__, 0, "line %d %s", (n, "é" * (n % 5)), None)
        record.created = 1_700_000_000 + n / 10
        record.msecs = (n % 10) * 100.0
        made.append(record)
    return made


def files_of(directory: Path) -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(directory.iterdir())}


def rotating(directory: Path, level: int = logging.INFO) -> logging.handlers.RotatingFileHandler:
    directory.mkdir()
    handler = logging.handlers.RotatingFileHandler(directory / "tm.log", maxBytes=700, backupCount=50, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(level)
    return handler


def test_batches_roll_the_file_over_before_the_same_lines_as_one_record_at_a_time(tmp_path: Path) -> None:
    lines = records(200)
    one_by_one, batched = rotating(tmp_path / "one"), rotating(tmp_path / "batched")
    try:
        for record in lines:
            if record.levelno >= one_by_one.level:
                one_by_one.handle(record)
        for start in range(0, len(lines), 13):  # batches of 13 and a rest
            write_batch(batched, lines[start : start + 13])
    finally:
        one_by_one.close()
        batched.close()
    expected = files_of(tmp_path / "one")
    assert len(expected) > 5, "the test writes enough to roll over several times"
    assert files_of(tmp_path / "batched") == expected


def test_level_and_filters_apply_per_handler_as_handle_would(tmp_path: Path) -> None:
    lines = records(30)
    one_by_one, batched = rotating(tmp_path / "one", logging.WARNING), rotating(tmp_path / "batched", logging.WARNING)
    for handler in (one_by_one, batched):
        handler.addFilter(lambda record: record.args[0] != 14)  # type: ignore[index]
    try:
        for record in lines:
            if record.levelno >= one_by_one.level:
                one_by_one.handle(record)
        write_batch(batched, lines)
    finally:
        one_by_one.close()
        batched.close()
    written = files_of(tmp_path / "batched")
    assert written == files_of(tmp_path / "one")
    assert [line.split()[5] for line in written["tm.log"].splitlines()] == ["0", "7", "21", "28"]


def test_other_handlers_get_each_record_through_handle() -> None:
    class Collecting(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.seen: list[int] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.seen.append(record.args[0])  # type: ignore[index]

    handler = Collecting()
    write_batch(handler, records(22))
    assert handler.seen == [0, 7, 14, 21]


def test_line_formatter_writes_the_stock_formatters_time() -> None:
    stock, cached = logging.Formatter(FORMAT), LineFormatter(FORMAT)
    for record in records(40):
        assert cached.format(record) == stock.format(record)
    now = logging.LogRecord("t", logging.INFO, __file__, 0, "now", None, None)
    assert cached.format(now) == stock.format(now)
    assert LineFormatter(FORMAT, "%H:%M").format(now) == logging.Formatter(FORMAT, "%H:%M").format(now)


def test_line_formatter_writes_the_stock_formatters_lines_with_exceptions_stacks_and_no_time() -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        failure = logging.LogRecord("t", logging.ERROR, __file__, 0, "failed %s", ("x",), sys.exc_info())
    stacked = logging.LogRecord(
        "t", logging.INFO, __file__, 0, "here", None, None, sinfo="Stack (most recent call last):"
    )
    tagged = logging.LogRecord("t", logging.INFO, __file__, 0, "tagged", None, None)
    tagged.task_tag = "[Sum (1/2)#0] "
    for fmt in (FORMAT, "%(levelname)s %(task_tag)s%(message)s", "%(message)s"):
        for record in [*records(3), failure, stacked, tagged]:
            if "task_tag" in fmt and not hasattr(record, "task_tag"):
                continue
            assert LineFormatter(fmt).format(record) == logging.Formatter(fmt).format(record)
    with pytest.raises(ValueError, match="Formatting field not found in record"):
        LineFormatter("%(no_such_field)s").format(records(1)[0])


def test_a_templates_records_are_makerecords_with_their_own_arguments_time_and_thread() -> None:
    logger = logging.getLogger("test.records")
    template = RecordTemplate(logger, logging.INFO, "%s switched from %s to %s.", __file__, "_transition")
    first = template.make(("a", "X", "Y"))
    made: list[logging.LogRecord] = []
    worker = threading.Thread(target=lambda: made.append(template.make(("b", "Y", "Z"))), name="task thread b")
    time.sleep(0.01)
    worker.start()
    worker.join()
    second = made[0]
    reference = logger.makeRecord(
        logger.name, logging.INFO, __file__, 0, first.msg, ("b", "Y", "Z"), None, "_transition"
    )
    varying = {"args", "created", "msecs", "relativeCreated", "thread", "threadName"}
    assert type(second) is logging.LogRecord
    assert {k: v for k, v in vars(second).items() if k not in varying} == {
        k: v for k, v in vars(reference).items() if k not in varying
    }
    assert second.getMessage() == "b switched from Y to Z."
    assert first.getMessage() == "a switched from X to Y."
    assert second.threadName == "task thread b" and second.thread != first.thread
    assert second.created > first.created
    assert second.msecs == int((second.created - int(second.created)) * 1000)


def test_a_templates_records_come_from_a_custom_record_factory_while_one_is_set() -> None:
    class Custom(logging.LogRecord):
        pass

    logger = logging.getLogger("test.records")
    template = RecordTemplate(logger, logging.INFO, "%s", __file__, "f")
    template.make(("warm",))
    previous = logging.getLogRecordFactory()
    logging.setLogRecordFactory(Custom)
    try:
        assert type(template.make(("x",))) is Custom
    finally:
        logging.setLogRecordFactory(previous)
    assert type(template.make(("y",))) is logging.LogRecord
