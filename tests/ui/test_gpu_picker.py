"""The Add GPU picker lists the database as people look for a board: by vendor, then by
name with its numbers read as numbers, not in the order the file happens to keep."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt

from rigspark_gui.catalog.gpu_database import GpuDatabase, load_gpu_database
from rigspark_gui.resources import data_file
from rigspark_gui.ui.gpu_picker_dialog import (
    VENDOR_ORDER,
    GpuPickerDialog,
    natural_key,
    picker_order,
)


@pytest.fixture(scope="module")
def database() -> GpuDatabase:
    return load_gpu_database(data_file("gpus.json"))


def _dialog(qtbot, database: GpuDatabase) -> GpuPickerDialog:  # type: ignore[no-untyped-def]
    dialog = GpuPickerDialog(database)
    qtbot.addWidget(dialog)
    return dialog


def test_numbers_sort_as_numbers() -> None:
    names = [
        "NVIDIA GeForce RTX 4090",
        "Tesla P100-PCIE-16GB",
        "NVIDIA GeForce RTX 3090",
        "Tesla P40",
        "NVIDIA GeForce RTX 3060 Ti",
        "Tesla P4",
        "NVIDIA GeForce RTX 3060",
        "Apple M2",
        "Apple M1 Max",
    ]
    # the maker's name is left out: "GeForce …" < "M1 …" < "Tesla …"
    assert sorted(names, key=natural_key) == [
        "NVIDIA GeForce RTX 3060",
        "NVIDIA GeForce RTX 3060 Ti",
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 4090",
        "Apple M1 Max",
        "Apple M2",
        "Tesla P4",
        "Tesla P40",
        "Tesla P100-PCIE-16GB",
    ]


def test_the_picker_lists_by_vendor_then_naturally(qtbot, database: GpuDatabase) -> None:
    names = _dialog(qtbot, database).visible_names()
    assert len(names) == len(database.gpus)
    at = {n: i for i, n in enumerate(names)}
    assert (
        at["NVIDIA GeForce RTX 3060"]
        < at["NVIDIA GeForce RTX 3060 Ti"]
        < at["NVIDIA GeForce RTX 3090"]
        < at["NVIDIA GeForce RTX 4090"]
        < at["NVIDIA GeForce RTX 5090"]
    )
    assert at["Tesla P4"] < at["Tesla P40"] < at["Tesla P100-PCIE-16GB"]
    assert at["AMD Radeon RX 7900 XT"] < at["AMD Radeon RX 7900 XTX"]
    assert at["AMD Instinct MI50"] < at["AMD Instinct MI100"] < at["AMD Instinct MI300X"]
    assert at["Apple M1"] < at["Apple M1 Max"] < at["Apple M2"] < at["Apple M4 Max"]
    by_name = {g.name: g for g in database.gpus}
    ranks = [VENDOR_ORDER.index(by_name[n].vendor) for n in names]
    assert ranks == sorted(ranks)  # NVIDIA, then AMD, Intel, Apple
    for rank in set(ranks):  # within a vendor: natural order
        group = [n for n, r in zip(names, ranks, strict=True) if r == rank]
        assert group == sorted(group, key=lambda n: (natural_key(n), n))


def test_the_order_does_not_depend_on_the_file(qtbot, database: GpuDatabase) -> None:
    shuffled = dataclasses.replace(database, gpus=tuple(reversed(database.gpus)))
    assert _dialog(qtbot, shuffled).visible_names() == _dialog(qtbot, database).visible_names()
    order = picker_order(database.gpus)
    assert sorted(order) == list(range(len(database.gpus)))


def test_filtering_and_choosing_keep_to_the_sorted_list(qtbot, database: GpuDatabase) -> None:
    dialog = _dialog(qtbot, database)
    qtbot.keyClicks(dialog.search_edit, "rtx 30")
    shown = dialog.visible_names()
    assert shown[0] == "NVIDIA GeForce RTX 3050" and shown[-1] == "NVIDIA GeForce RTX 3090 Ti"
    qtbot.keyClick(dialog.search_edit, Qt.Key.Key_Down)
    spec = dialog.selected_spec()
    assert spec is not None and spec.name == shown[1]
