"""The storage contract on etcd over TLS with client certificates: a representative part of
the suite (create, get, compare-and-swap updates and deletes, lists, watch with replay and
progress, compaction, concurrent writers), each test the contract's own, run here on an etcd
started with ``--client-cert-auth`` and reached through ``https://`` with setpoint's client
certificate. The rest of the contract is the plain etcd kind's: TLS changes only the channel.
"""

from __future__ import annotations

import pytest

from tests.integration.storage import test_contract_compaction as compaction
from tests.integration.storage import test_contract_concurrency as concurrency
from tests.integration.storage import test_contract_progress as progress
from tests.integration.storage import test_contract_reads as reads
from tests.integration.storage import test_contract_watch as watch
from tests.integration.storage import test_contract_writes as writes


@pytest.fixture
def kind() -> str:
    return "etcd-tls"


test_create_then_get = writes.test_create_then_get
test_create_existing_key_raises_key_exists_with_current_value = \
    writes.test_create_existing_key_raises_key_exists_with_current_value
test_update_with_current_revision_succeeds = writes.test_update_with_current_revision_succeeds
test_update_with_other_revision_raises_conflict = \
    writes.test_update_with_other_revision_raises_conflict
test_delete_compares_when_given_a_revision = writes.test_delete_compares_when_given_a_revision
test_get_at_older_revisions_sees_the_value_then = \
    reads.test_get_at_older_revisions_sees_the_value_then
test_list_with_start_after_and_limit = reads.test_list_with_start_after_and_limit
test_watch_from_a_revision_replays_exactly_the_suffix_then_goes_live = \
    watch.test_watch_from_a_revision_replays_exactly_the_suffix_then_goes_live
test_events_carry_previous_values = watch.test_events_carry_previous_values
test_close_ends_every_watch = watch.test_close_ends_every_watch
test_writes_outside_the_prefix_are_reported_as_progress = \
    progress.test_writes_outside_the_prefix_are_reported_as_progress
test_reads_below_the_compacted_revision_raise_expired = \
    compaction.test_reads_below_the_compacted_revision_raise_expired
test_watch_from_a_compacted_revision_raises_expired_on_first_step = \
    compaction.test_watch_from_a_compacted_revision_raises_expired_on_first_step
test_concurrent_compare_and_swap_has_exactly_one_winner = \
    concurrency.test_concurrent_compare_and_swap_has_exactly_one_winner
