"""Epochs close in order (no JVM): which epoch a close without --epoch takes, and the
rule that refuses sealing or closing an epoch while an earlier one is not closed."""

from __future__ import annotations

import pytest

from cumulus.config import Settings
from cumulus.errors import EpochOrderError, StoreError
from cumulus.store.ledger import LedgerRow, check_in_order, next_to_close


def ledger(*states: str) -> list[LedgerRow]:
    return [LedgerRow(epoch=n, state=s) for n, s in enumerate(states, start=1)]


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(home=tmp_path)


def test_a_close_takes_the_open_epoch_when_nothing_is_sealed(settings) -> None:
    assert next_to_close(ledger("closed", "published", "failed-validation", "open"), settings) == (4, "the open epoch")


def test_a_close_resumes_the_oldest_sealed_epoch_before_the_open_one(settings) -> None:
    epoch, why = next_to_close(ledger("published", "applied", "open"), settings)
    assert epoch == 2 and "interrupted" in why
    # A ledger left by an older Cumulus that closed epochs out of order: the oldest first.
    assert next_to_close(ledger("applied", "closed", "applied", "open")[::-1], settings)[0] == 1


def test_no_open_epoch_is_an_uninitialized_home(settings) -> None:
    with pytest.raises(StoreError, match="initialize the home first"):
        next_to_close([], settings)


def test_an_epoch_waits_for_every_earlier_one_to_close(settings) -> None:
    rows = ledger("closed", "applied", "open")
    check_in_order(rows, 2, "epoch 2 cannot be closed", settings)  # nothing before it is pending
    with pytest.raises(EpochOrderError) as err:
        check_in_order(rows, 3, "epoch 3 cannot be sealed", settings)
    message = str(err.value)
    assert message.startswith("epoch 3 cannot be sealed: epoch 2 is sealed but not closed")
    assert f"cumulus --home {settings.home} epoch close --epoch 2" in message
    check_in_order(ledger("published", "failed-validation", "closed", "open"), 4, "x", settings)
