"""Words that reach a page are put into the reader's language when the page is rendered (issue
38, item 4): events are kept as message ids with their parameters, the backup schedule and the
Configuration card's help are translated per request, and numbers, days and moments in a message
are written the German way on a German page."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import translation

from panel.backups.services import backups
from panel.clusters.forms import ConfigForm
from panel.clusters.lib import tunables
from panel.clusters.models import ClusterEvent
from panel.clusters.services import transitions
from panel.clusters.tests.conftest import make_cluster_row
from panel.core.errors import Count, Message, When, message_from_json, message_to_json
from panel.managed.lib.updates import day_name

pytestmark = pytest.mark.django_db


def test_an_event_logged_in_english_is_read_in_german(owner: User) -> None:
    cluster = make_cluster_row(owner)
    with translation.override("en"):  # the worker that logs it speaks English
        assert transitions.mark_postmaster_gone(cluster)
    event = ClusterEvent.objects.filter(cluster=cluster, kind="postmaster-gone").get()
    assert event.message == "PostgreSQL is not running; the reconciler will start it again."
    assert event.text, "kept as a message id with its parameters, not as finished text"
    with translation.override("de"):
        assert event.shown == "PostgreSQL läuft nicht; der Abgleichsdienst startet es erneut."


def test_a_coded_refusal_is_kept_as_its_message(owner: User) -> None:
    from panel.core.errors import ServiceError

    cluster = make_cluster_row(owner)
    refusal = ServiceError("Backup failed: %(reason)s", code="backup.failed", params={"reason": "x"})
    event = transitions.log_event(cluster, "pooler-error", refusal.as_message())
    assert event.text and event.text["$message"] == "Backup failed: %(reason)s"
    with translation.override("de"):
        assert event.shown != event.message and "x" in event.shown


def test_numbers_days_and_moments_in_a_message_are_written_the_german_way() -> None:
    moment = dt.datetime(2026, 11, 25, 14, 3, 9, tzinfo=dt.UTC)
    message = Message(
        "%(day)s: %(s).1f s, %(n)s rows at %(when)s",
        day=day_name("wednesday"),
        s=17.5,
        n=Count(12345),
        when=When.of(moment),
    )
    again = message_from_json(message_to_json(message))  # as an event keeps it
    with translation.override("en"):
        assert str(again) == "Wednesday: 17.5 s, 12,345 rows at 2026-11-25 14:03:09"
    with translation.override("de"):
        assert str(again) == "Mittwoch: 17,5 s, 12.345 rows at 25.11.2026 14:03:09"


def test_the_backup_schedule_follows_the_reader_not_the_import() -> None:
    with translation.override("en"):
        english = backups.schedule_text()
    with translation.override("de"):
        german = backups.schedule_text()
    assert english.startswith("Daily at ")
    assert german.startswith("Täglich um ")


def test_the_configuration_help_is_german_on_a_german_page() -> None:
    current = tunables.effective({})
    with translation.override("de"):
        form = ConfigForm(current=current)
        help_text = str(form.fields["work_mem"].help_text)
        timezone_help = str(form.fields["timezone"].help_text)
    assert "Speicher" in help_text and "Bereich: 1 … 1024 MB. Standard: 4." in help_text
    assert "IANA-Zeitzonenname" in timezone_help and "time zone" not in timezone_help
    assert "Standard: UTC." in timezone_help


def test_a_step_the_worker_stored_in_english_is_shown_in_german(owner: User, owner_client) -> None:
    from panel.accounts.services import SESSION_KEY
    from panel.clusters.models import ClusterStatus

    cluster = make_cluster_row(owner, status=ClusterStatus.STARTING, progress=40)
    with translation.override("en"):  # the worker's language
        transitions.set_progress(cluster, 40, translation.gettext("Starting"))
    session = owner_client.session
    session[SESSION_KEY] = "de"  # the account's language, as the header's menu keeps it
    session.save()
    html = owner_client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert 'id="cluster-progress"' in html
    progress = html.split('id="cluster-progress"', 1)[1][:400]
    assert "Wird gestartet" in progress and "Starting" not in progress


def test_g_and_f_fields_take_the_decimal_mark_too() -> None:
    message = Message("%(a)g / %(b)g / %(c).0f%% / %(d)d / %(e)s", a=0.5, b=90.0, c=91.6, d=3, e="x")
    with translation.override("en"):
        assert str(message) == "0.5 / 90 / 92% / 3 / x"
    with translation.override("de"):
        assert str(message) == "0,5 / 90 / 92% / 3 / x"


def test_a_data_sets_progress_is_put_into_words_where_it_is_read(owner: User) -> None:
    from benchmarks.models import DataSet
    from benchmarks.services.datasets import _stored
    from panel.core.errors import N_

    dataset = DataSet.objects.create(cluster=make_cluster_row(owner), database="appdb")
    with translation.override("en"):  # the worker's language
        dataset.progress_message = _stored(
            Message(N_("Generating data: %(p)s%%"), "dataset.generating", p=45)
        )
    with translation.override("de"):
        assert dataset.progress_shown == translation.gettext("Generating data: %(p)s%%") % {"p": 45}
        assert dataset.progress_shown.startswith("Daten")
        dataset.progress_message = "Queued"  # a step's English words
        assert dataset.progress_shown == "In Warteschlange"
        dataset.progress_message = "vacuuming..."  # the tool's own line
        assert dataset.progress_shown == "vacuuming..."
