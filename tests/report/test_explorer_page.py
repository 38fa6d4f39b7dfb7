"""The flip explorer in a real browser: Debian's headless Chromium (driven through Playwright's PyPI package,
never a browser download) loads the explorer.html of a reference-policy audit from disk, a filter is applied,
a flipped item is opened, and its K orderings with their prompts, images and answers are on the page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from headless_chromium import browser_context, needs_chromium

from facet_probe import api

K = 6

pytestmark = [needs_chromium, pytest.mark.slow]  # a headless browser and the audits it shows


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A position-biased reference-policy audit (flips on every facet), 3 items per cell: a few seconds."""
    root = tmp_path_factory.mktemp("audit")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "facet_probe", "model=position_biased", "limit=3",
                           f"out_root={root}", "progress=false"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (folder,) = root.glob("position_biased/offline/*")
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One browser for the module, at the width the page must fit (1400 x 1000)."""
    with browser_context(tmp_path_factory.mktemp("profile"), viewport={"width": 1400, "height": 1000}) as context:
        yield context


def open_page(browser, path: Path):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=20_000)
    return page, errors


def test_a_flipped_item_opens_to_its_orderings_side_by_side(run_folder, browser, tmp_path):
    page, errors = open_page(browser, run_folder / "explorer.html")
    assert page.locator("#recovery").inner_text().startswith("Every prompt shown")  # hashes all matched
    total = page.locator("#count").inner_text()
    assert total == "18 of 18 items"

    page.select_option("#f-dataset", "synthetic_visual_mcq")
    page.select_option("#f-status", "flipped")
    count = page.locator("#count").inner_text()
    shown = page.locator("table.items tbody tr")
    assert count == f"{shown.count()} of 18 items" and 1 <= shown.count() <= 3
    assert set(page.locator("table.items tbody tr td .cell").all_inner_texts()) == {
        "option_order / synthetic_visual_mcq"}
    shown.first.click()

    cards = page.locator(".ordering")
    assert cards.count() == K
    assert page.locator(".ordering h3").all_inner_texts() == [
        "ordering 0 (source order)", *(f"ordering {o}" for o in range(1, K))]
    texts = cards.all_inner_texts()
    assert all("parsed:" in t and ("✓ correct" in t or "✗ wrong" in t) for t in texts)
    assert all("(as displayed)" in t and "in source order" in t for t in texts)
    answers = page.locator(".ordering .ans").all_inner_texts()
    assert len({a.split('"')[1] for a in answers}) >= 2  # flipped: more than one meaning across orderings
    assert page.locator(".ordering .prompt img").count() == K  # the item's picture, inline, once per ordering
    assert page.evaluate("new Set([...document.querySelectorAll('.ordering .prompt img')].map(i => i.src)).size") == 1
    assert page.locator(".hash.exact").count() == K
    assert "item=" in page.evaluate("location.hash")  # the open item can be linked to

    shot = tmp_path / "explorer.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    assert errors == []


def test_a_report_link_opens_its_item(run_folder, browser):
    report = (run_folder / "report.md").read_text()
    link = report.split("](explorer.html#", 1)[1].split(")", 1)[0]
    page, errors = open_page(browser, run_folder / "explorer.html")
    page.goto((run_folder / "explorer.html").as_uri() + "#" + link)
    page.reload()
    page.wait_for_function("document.body.dataset.ready === '1'")
    item = link.split("item=", 1)[1].split("&", 1)[0].replace("%2F", "/").replace("%3A", ":")
    assert page.locator("#item-title").inner_text() == item.split("/", 1)[1]
    assert page.locator(".ordering").count() == K
    assert errors == []


def test_a_v0_0_1_trials_file_shows_its_replies_answers_and_flips(browser, tmp_path):
    """FACET-PROBE v0.0.1 trials (tests/fixtures/README.md): no prompt to show, the rest as stored."""
    api.report([f"input={Path(__file__).parents[1] / 'fixtures' / 'reference_v0_0_1' / 'trials.jsonl'}",
                f"out={tmp_path}", "bootstrap=10"])
    page, errors = open_page(browser, tmp_path / "explorer.html")
    assert "cannot be rendered (item, facet or prompt mode missing" in page.locator("#recovery").inner_text()
    page.select_option("#f-status", "flipped")
    assert page.locator("#count").inner_text() == "2 of 3 items"
    page.locator('tr[data-key="option_order/mmlu_pro::2"]').click()
    assert page.locator("#item-title").inner_text() == "mmlu_pro::2"
    assert page.locator(".ordering pre").all_inner_texts() == ["Answer: A", "Answer: B", "Answer: B"]
    assert page.locator(".ordering .ans").all_inner_texts() == ["A (stored as 0)", "A (stored as 0)", "C (stored as 2)"]
    assert [m.inner_text() for m in page.locator(".ordering .reply > div:last-child span:last-child").all()] == [
        "✓ correct", "✓ correct", "✗ wrong"]
    assert page.locator(".ordering .prompt").all_inner_texts() == [
        "(prompt not recoverable: item, facet or prompt mode missing)"] * 3
    assert page.locator(".badge.flipped").count() >= 1
    assert errors == []


@pytest.fixture
def chunked_page(run_folder, tmp_path, monkeypatch) -> Path:
    """The run's page as a paper-scale one is written: every item's details in its own chunk file beside it."""
    from facet_probe.report.explorer import chunks, page
    from facet_probe.report.explorer.build import explorer_for_runs

    monkeypatch.setattr(page, "INLINE_BYTES", 0)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    built = explorer_for_runs([run_folder], tmp_path / "page", "chunked")
    assert len(list((tmp_path / "page" / page.DATA_DIR).glob("*.js"))) == 18  # one per item
    return built


def test_an_item_whose_data_is_in_a_chunk_file_opens_to_its_orderings(chunked_page, browser):
    page, errors = open_page(browser, chunked_page)
    assert page.locator("#count").inner_text() == "18 of 18 items"
    assert page.evaluate("document.querySelectorAll('script[src]').length") == 0  # no item's data read yet
    page.select_option("#f-dataset", "synthetic_visual_mcq")
    page.select_option("#f-status", "flipped")
    page.locator("table.items tbody tr").first.click()
    page.wait_for_selector(".ordering")
    assert page.evaluate("[...document.querySelectorAll('script[src]')].map(s => s.getAttribute('src'))")[0].startswith(
        "explorer_data/")
    assert page.locator(".ordering h3").all_inner_texts() == [
        "ordering 0 (source order)", *(f"ordering {o}" for o in range(1, K))]
    answers = page.locator(".ordering .ans").all_inner_texts()
    assert len({a.split('"')[1] for a in answers}) >= 2
    assert page.locator(".ordering .prompt img").count() == K and page.locator(".hash.exact").count() == K
    assert page.evaluate("[...document.querySelectorAll('.ordering .prompt img')].every(i => i.naturalWidth > 0)")

    link = page.evaluate("location.hash")  # the open item, linked to: shown before the page says it is ready
    again, errors_again = open_page(browser, chunked_page)
    again.goto(chunked_page.as_uri() + link)
    again.reload()
    again.wait_for_function("document.body.dataset.ready === '1'")
    assert again.locator(".ordering").count() == K
    assert errors == [] and errors_again == []


def test_a_missing_chunk_file_says_to_build_the_page_again(chunked_page, browser):
    for f in (chunked_page.parent / "explorer_data").glob("*.js"):
        f.unlink()
    page, errors = open_page(browser, chunked_page)
    page.locator("table.items tbody tr").first.click()
    message = page.locator("#detail .error").inner_text()
    assert "could not be read: build the page again (python -m facet_probe.explore" in message
    assert errors == []


@pytest.fixture(scope="module")
def two_run_page(run_folder, tmp_path_factory) -> Path:
    """One model over two runs (its badges carry the run's name) whose first items in source order, the
    document_rank_order ones, are stable (answered alike under every ordering) and the others flip."""
    from facet_probe.metrics.flips import item_metrics
    from facet_probe.report.explorer.build import one_hydra
    from facet_probe.report.explorer.data import Blob
    from facet_probe.report.explorer.page import write_page
    from facet_probe.scoring.run_trials import read_run
    from facet_probe.store.reading import read_items

    trials = read_run(run_folder).trials
    docs = trials["facet"].eq("document_rank_order")
    first = trials[docs].sort_values("ordering_idx").groupby("item_id")[["answer_normalized", "correct"]].first()
    for column in ("answer_normalized", "correct"):
        trials.loc[docs, column] = trials.loc[docs, "item_id"].map(first[column]).to_numpy()
    out = tmp_path_factory.mktemp("two_runs")
    blob = Blob(out, "two runs")
    with one_hydra():
        for run in ("position_biased/offline/direct-k6-seed42_limit=3", "position_biased/offline/direct-k6-seed7"):
            blob.add_run(run, trials, read_items([run_folder / "items.jsonl"]), item_metrics(trials), {}, None,
                         {"position_biased": f"position_biased @ {run}"})
    return write_page(blob.to_json(), out)


def test_the_list_opens_on_flipped_items_and_sorts_by_a_column(two_run_page, browser):
    page, errors = open_page(browser, two_run_page)
    firsts = page.locator("table.items tbody tr").all()
    statuses = [row.get_attribute("data-key") for row in firsts]
    assert not any(key.startswith("document_rank_order/") for key in statuses[:15])  # the 3 stable items last
    assert all(key.startswith("document_rank_order/") for key in statuses[15:])
    page.locator("table.items th", has_text="item").click()  # sorted by item: source order again
    assert page.locator("table.items tbody tr").first.get_attribute("data-key").startswith("document_rank_order/")
    assert "sort=item" in page.evaluate("location.hash")
    assert errors == []


def test_the_question_and_every_badge_are_visible_without_scrolling_at_1400_px(two_run_page, browser):
    page, errors = open_page(browser, two_run_page)
    fit = page.evaluate("""() => {
      const list = document.querySelector('#list'), box = list.getBoundingClientRect();
      const q = document.querySelector('table.items tbody tr td.q').getBoundingClientRect();
      const badges = [...document.querySelectorAll('table.items .badge')];
      return {scroll: list.scrollWidth, client: list.clientWidth, qLeft: q.left, qRight: q.right, right: box.right,
              cut: badges.filter(b => b.scrollWidth > b.clientWidth || b.getBoundingClientRect().right > box.right)
                         .map(b => b.textContent), n: badges.length};
    }""")
    assert fit["scroll"] <= fit["client"]  # no horizontal scrollbar hides a column
    assert fit["qRight"] <= fit["right"] and fit["qRight"] - fit["qLeft"] >= 120  # the question, readable
    assert fit["n"] >= 36 and fit["cut"] == []  # two badges a row, each whole
    assert errors == []


def test_an_items_k_orderings_fit_the_width_at_1400_px(run_folder, browser):
    page, errors = open_page(browser, run_folder / "explorer.html")
    page.locator("table.items tbody tr").first.click()
    page.wait_for_selector(".ordering")
    rights = page.evaluate("[...document.querySelectorAll('.ordering')].map(e => e.getBoundingClientRect().right)")
    assert len(rights) == K and max(rights) <= page.evaluate("window.innerWidth")
    assert page.evaluate("(() => { const o = document.querySelector('.orderings');"
                         " return o.scrollWidth <= o.clientWidth; })()")
    assert errors == []


def test_the_header_says_why_the_prompts_shown_are_fewer_than_the_trials(run_folder, browser):
    page, errors = open_page(browser, run_folder / "explorer.html")
    text = page.locator("#recovery").inner_text()
    prompts = len({t["prompt_hash"] for t in map(json.loads, (run_folder / "trials.jsonl").read_text().splitlines())})
    assert prompts < 108  # items with fewer than K distinct orderings repeat one
    assert text.startswith(f"Every prompt shown ({prompts} distinct prompts for 108 trials")
    assert "repeat an ordering" in text and "share one prompt" in text
    assert errors == []
