"""The web board (`leaderboard.site`): written by `membench leaderboard`, a pure function of the
submissions, escaped, and working in a real browser (headless Chromium: sort, filter, open a model
page, plots drawn, no console error). Screenshots of each page go to the test's tmp folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.app.cli import main
from harness.core.errors import UserError
from harness.core.results import ResultsFile
from leaderboard.site import MARKER, render_site, write_site
from tests.helpers.board_files import ID_A, ID_B, ID_C, make_results, submit
from tests.helpers.browser import browser_errors, chromium_driver

EVIL = '<img src=x onerror="window.pwned=1"><b>bold</b>'
ID_D, ID_E, ID_F = "d" * 64, "e" * 64, "f" * 64


def changed(results: ResultsFile, **model_fields) -> ResultsFile:
    return results.model_copy(update={"model": results.model.model_copy(update=model_fields)})


@pytest.fixture
def submissions(tmp_path) -> Path:
    """Six models: two causal LMs, a masked LM, a pruned one, one run with --limit, one with a
    hostile name; two tasks."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("model-a", ID_A, auc=0.61))
    submit(folder, make_results("model-b", ID_B, auc=0.72))
    submit(folder, make_results("model-b", ID_B, auc=0.30, task="other_task"), "b-other.json")
    submit(folder, changed(make_results("bert-c", ID_C, auc=0.55), kind="masked-lm"))
    submit(folder, changed(make_results("model-a-pruned", ID_D, auc=0.66),
                           details={"pruning": {"linear_weight_sparsity": 0.5}}))
    submit(folder, make_results("quick-e", ID_E, auc=0.50, limit=5))
    submit(folder, make_results(EVIL, ID_F, auc=0.58))
    return folder


@pytest.fixture
def site(tmp_path, submissions) -> Path:
    output = tmp_path / "board" / "LEADERBOARD.md"
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 0
    return output.parent / "site"


def test_the_site_has_an_index_a_page_per_task_and_per_model(site):
    assert (site / "index.html").is_file() and (site / MARKER).is_file()
    assert sorted(p.name for p in (site / "tasks").iterdir()) == ["mink_membership.html", "other_task.html"]
    assert len(list((site / "models").iterdir())) == 6
    plotly = (site / "plotly.min.js").read_bytes()
    assert len(plotly) > 1_000_000 and b"plotly.js" in plotly[:2000]  # bundled, not from a CDN
    pages = [p.read_text(encoding="utf-8") for p in site.rglob("*.html")]
    assert not any("http://" in page or "https://" in page for page in pages)  # nothing fetched from elsewhere
    board = json.loads((site / "board.json").read_text(encoding="utf-8"))
    assert {m["name"] for m in board["models"]} >= {"model-a", "model-b", EVIL}
    model_b = next(m for m in board["models"] if m["name"] == "model-b")
    assert sorted(model_b["tasks"]) == ["mink_membership", "other_task"]


def test_the_site_is_a_pure_function_of_the_submissions(submissions):
    assert render_site(submissions) == render_site(submissions)


def test_text_from_a_submission_reaches_the_pages_escaped(site):
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "<img" not in text and "<b>bold" not in text, page.name
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=&#34;window.pwned=1&#34;&gt;&lt;b&gt;bold&lt;/b&gt;" in index
    task = (site / "tasks" / "mink_membership.html").read_text(encoding="utf-8")
    # in the plot's JSON: escaped for plotly's labels (&lt;), then for the script element (\u0026)
    assert "\\u0026lt;img src=x onerror=\\\"window.pwned=1\\\"\\u0026gt;" in task


def test_a_folder_membench_did_not_write_is_never_replaced(tmp_path, submissions):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="membench did not write"):
        write_site(submissions, precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    write_site(submissions, tmp_path / "site")
    (tmp_path / "site" / "stale.html").write_text("old")
    write_site(submissions, tmp_path / "site")  # a site of its own is replaced whole
    assert not (tmp_path / "site" / "stale.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "site", "submissions"]  # no staging left


# ---------------------------------------------------------------- in headless Chromium


@pytest.fixture(scope="module")
def driver():
    session = chromium_driver()
    yield session
    session.quit()


def visible_rows(driver, table_id: str) -> list[list[str]]:
    return driver.execute_script(
        "return Array.from(document.getElementById(arguments[0]).tBodies[0].rows)"
        ".filter(r => !r.hidden).map(r => Array.from(r.cells).filter(c => !c.hidden).map(c => c.textContent.trim()))",
        table_id)


def headers(driver, table_id: str) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.getElementById(arguments[0]).tHead.rows[0].cells)"
        ".filter(c => !c.hidden).map(c => c.textContent.trim())", table_id)


def click_header(driver, table_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    table = driver.find_element(By.ID, table_id)
    next(b for b in table.find_elements(By.CSS_SELECTOR, "thead th button") if b.text.startswith(text)).click()


def select(driver, element_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, element_id)).select_by_value(value)


def test_index_sorts_filters_and_links_to_model_pages(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get((site / "index.html").as_uri())
    browser_errors(driver)
    assert headers(driver, "overview") == ["model", "kind", "sparsity", "mink ↓", "other ↓"]
    assert len(visible_rows(driver, "overview")) == 6
    assert driver.find_element(By.ID, "shown").text == "6 of 6 models"

    click_header(driver, "overview", "mink")  # ascending: best (lowest) first
    values = [float(row[3].split()[0]) for row in visible_rows(driver, "overview")]
    assert values == sorted(values) and values[0] == 0.50
    click_header(driver, "overview", "mink")  # and descending
    values = [float(row[3].split()[0]) for row in visible_rows(driver, "overview")]
    assert values == sorted(values, reverse=True)
    click_header(driver, "overview", "other")  # a column most models lack: the empty cells stay last
    assert [row[4] for row in visible_rows(driver, "overview")][:2] == ["0.300 [0.250, 0.350]", ""]
    driver.save_screenshot(str(tmp_path / "index.png"))

    select(driver, "filter-kind", "masked-lm")
    assert [row[0] for row in visible_rows(driver, "overview")] == [f"bert-c ({ID_C[:8]})"]
    select(driver, "filter-kind", "")
    select(driver, "filter-sparsity", "pruned")
    assert [row[0] for row in visible_rows(driver, "overview")] == [f"model-a-pruned ({ID_D[:8]})"]
    select(driver, "filter-sparsity", "")
    select(driver, "filter-run", "limit")
    assert [row[0] for row in visible_rows(driver, "overview")] == [f"quick-e ({ID_E[:8]}) † limit 5"]
    select(driver, "filter-run", "")
    select(driver, "filter-task", "other_task")  # only the models that ran it, only its column
    assert headers(driver, "overview") == ["model", "kind", "sparsity", "other ↓"]
    assert visible_rows(driver, "overview") == [[f"model-b ({ID_B[:8]})", "causal-lm", "", "0.300 [0.250, 0.350]"]]
    select(driver, "filter-task", "")
    driver.find_element(By.ID, "search").send_keys("IMG SRC")
    [evil_row] = visible_rows(driver, "overview")
    assert evil_row[0] == f"{EVIL} ({ID_F[:8]})"  # shown as text
    assert driver.execute_script("return window.pwned === undefined && document.images.length === 0")
    driver.find_element(By.ID, "search").clear()
    driver.find_element(By.ID, "search").send_keys("model-b")
    assert driver.find_element(By.ID, "shown").text == "1 of 6 models"

    driver.find_element(By.LINK_TEXT, f"model-b ({ID_B[:8]})").click()
    assert driver.current_url.endswith(f"models/model-b-{ID_B[:12]}.html")
    assert driver.find_element(By.TAG_NAME, "h1").text == "model-b"
    page = driver.find_element(By.TAG_NAME, "main").text
    assert ID_B in page and "./model-b" in page and '"batch_size": 16' in page  # identity, source, settings
    assert [row[:3] for row in visible_rows(driver, "headlines")] == [
        ["mink_membership", "Min-K% 20% AUC, 128 words (lower is better)", "0.720 [0.670, 0.770]"],
        ["other_task", "Min-K% 20% AUC, 128 words (lower is better)", "0.300 [0.250, 0.350]"]]
    assert "0.710 [0.660, 0.760]" in page  # every metric of each task: the AUC at length 64
    driver.save_screenshot(str(tmp_path / "model.png"))
    assert browser_errors(driver) == []


def test_task_page_draws_its_plot_and_filters_its_full_table(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get((site / "tasks" / "mink_membership.html").as_uri())
    browser_errors(driver)
    traces = driver.execute_script("return document.getElementById('plot').data.map(t => t.name)")
    assert len(traces) == 6 and "&lt;img src=x onerror=\"window.pwned=1\"&gt;&lt;b&gt;bold&lt;/b&gt; (ffffffff)" in traces
    legend = driver.execute_script("return Array.from(document.querySelectorAll('#plot .legendtext'))"
                                   ".map(t => t.textContent)")
    assert f"{EVIL} (ffffffff)" in legend  # plotly shows the escaped name as the text it is
    assert driver.execute_script("return window.pwned === undefined && document.images.length === 0")
    assert len(visible_rows(driver, "summary")) == 6
    assert len(visible_rows(driver, "all-metrics")) == 6 * 3  # a row per (model, length)
    driver.find_element(By.CSS_SELECTOR, "input.row-filter").send_keys("quick-e")
    assert {row[0] for row in visible_rows(driver, "all-metrics")} == {f"quick-e ({ID_E[:8]}) † limit 5"}
    assert driver.find_element(By.CSS_SELECTOR, "article.card h1").text.startswith("Task card: mink_membership")
    driver.save_screenshot(str(tmp_path / "task.png"))
    assert browser_errors(driver) == []


# ---------------------------------------------------------------- the GitHub workflow


def test_the_workflow_checks_pull_requests_and_publishes_the_site_on_main():
    import yaml

    workflow = yaml.safe_load((Path(__file__).parents[2] / ".github" / "workflows" / "leaderboard.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"] and "pull_request" in triggers
    steps = workflow["jobs"]["board"]["steps"]
    on_pull_request = [s["run"] for s in steps if s.get("if") == "github.event_name == 'pull_request'"]
    assert on_pull_request == ["membench leaderboard --check"]
    [build] = [s["run"] for s in steps if "membench leaderboard --site" in s.get("run", "")]
    site = build.split("--site")[1].split()[0]
    [upload] = [s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact")]
    assert upload["with"]["path"] == site and upload["if"] == "github.event_name != 'pull_request'"
    pages = workflow["jobs"]["pages"]
    assert pages["needs"] == "board" and pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert pages["steps"][0]["uses"].startswith("actions/deploy-pages")
