"""The web board (`leaderboard.site`): written by `membench leaderboard`, a pure function of the
submissions, escaped, and working in a real browser (headless Chromium: the real models and the
reference controls as two groups, each sorted within itself, filtered together; open a model page,
plots drawn, no console error). Screenshots of each page go to the test's tmp folder, and to
$MEMBENCH_BOARD_SHOTS too where that names a folder (to look at them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.app.cli import main
from harness.core.errors import UserError
from harness.core.results import ResultsFile
from leaderboard.site import MARKER, render_site, write_site
from tests.helpers.board_files import ID_A, ID_B, ID_C, RECIPE, make_results, submit, twin_of
from tests.helpers.browser import browser_errors, chromium_driver

EVIL = '<img src=x onerror="window.pwned=1"><b>bold</b>'
ID_D, ID_E, ID_F, ID_G = "d" * 64, "e" * 64, "f" * 64, "1" * 64
REF, TWIN = "membench-ref/xsum-gpt2-e30 (99999999)", f"model-a-untrained-seed0 ({ID_G[:8]})"


def changed(results: ResultsFile, **model_fields) -> ResultsFile:
    return results.model_copy(update={"model": results.model.model_copy(update=model_fields)})


@pytest.fixture
def submissions(tmp_path) -> Path:
    """Six real models: two causal LMs (model-a's run with changed settings), a masked LM, a pruned
    one, one run with --limit, one with a hostile name; two reference controls: a reference
    checkpoint (with changed settings, never marked on a control) and model-a's untrained twin;
    two tasks."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("model-a", ID_A, auc=0.61, changed_settings=["lengths"]))
    submit(folder, make_results("model-b", ID_B, auc=0.72))
    submit(folder, make_results("model-b", ID_B, auc=0.30, task="other_task"), "b-other.json")
    submit(folder, changed(make_results("bert-c", ID_C, auc=0.55), kind="masked-lm"))
    submit(folder, changed(make_results("model-a-pruned", ID_D, auc=0.66),
                           details={"pruning": {"parameter_sparsity": 0.5}}))
    submit(folder, make_results("quick-e", ID_E, auc=0.50, limit=5))
    submit(folder, make_results(EVIL, ID_F, auc=0.58))
    submit(folder, make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.99, details=RECIPE,
                                changed_settings=["lengths"]), "ref.json")
    submit(folder, make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.40, task="other_task", details=RECIPE),
           "ref-other.json")
    submit(folder, make_results("model-a-untrained-seed0", ID_G, auc=0.49, details=twin_of(ID_A)))
    return folder


@pytest.fixture
def site(tmp_path, submissions) -> Path:
    output = tmp_path / "board" / "LEADERBOARD.md"
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 0
    return output.parent / "site"


def test_the_site_has_an_index_a_page_per_task_and_per_model(site):
    assert (site / "index.html").is_file() and (site / MARKER).is_file()
    assert sorted(p.name for p in (site / "tasks").iterdir()) == ["mink_membership.html", "other_task.html"]
    assert len(list((site / "models").iterdir())) == 8
    plotly = (site / "plotly.min.js").read_bytes()
    assert len(plotly) > 1_000_000 and b"plotly.js" in plotly[:2000]  # bundled, not from a CDN
    pages = [p.read_text(encoding="utf-8") for p in site.rglob("*.html")]
    assert not any("http://" in page or "https://" in page for page in pages)  # nothing fetched from elsewhere
    board = json.loads((site / "board.json").read_text(encoding="utf-8"))
    assert {m["name"] for m in board["models"]} >= {"model-a", "model-b", EVIL}
    model_b = next(m for m in board["models"] if m["name"] == "model-b")
    assert sorted(model_b["tasks"]) == ["mink_membership", "other_task"]
    assert [m["control"] for m in board["models"]] == [False] * 6 + [True] * 2  # the real models first
    model_a = next(m for m in board["models"] if m["name"] == "model-a")
    assert model_a["tasks"]["mink_membership"]["changed_settings"] == ["lengths"]


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


def test_a_group_without_models_says_so_and_the_controls_note_shows_its_code(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.99, details=RECIPE))
    index = render_site(folder)["index.html"].decode("utf-8")
    real = index.split('<tbody data-group="real">')[1].split("</tbody>")[0]
    assert '<tr class="fixed group-empty"><td colspan="3">none yet</td></tr>' in real and "<td>" not in real
    controls = index.split('<tbody data-group="control">')[1].split("</tbody>")[0]
    assert "membench-ref/xsum-gpt2-e30 (99999999)" in controls and "<code>membench run</code> checks" in controls


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


def visible_rows(driver, table_id: str, group: str | None = None) -> list[list[str]]:
    """The text of the visible cells of the table's visible data rows (not a group's heading), in
    page order; `group`: of that group's tbody only."""
    return driver.execute_script(
        "return Array.from(document.getElementById(arguments[0]).tBodies)"
        ".filter(b => !b.hidden && (!arguments[1] || b.dataset.group === arguments[1]))"
        ".flatMap(b => Array.from(b.rows)).filter(r => !r.hidden && !r.classList.contains('fixed'))"
        ".map(r => Array.from(r.cells).filter(c => !c.hidden).map(c => c.textContent.trim()))",
        table_id, group)


def group_heads(driver, table_id: str) -> list[tuple[str, str, str, int]]:
    """(group, title, count, colspan) of each visible group heading of the table."""
    return driver.execute_script(
        "return Array.from(document.getElementById(arguments[0]).tBodies).filter(b => !b.hidden)"
        ".map(b => [b.dataset.group, b.querySelector('.group-title').textContent,"
        " b.querySelector('.group-count').textContent, b.querySelector('tr.fixed > th').colSpan])", table_id)


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


def screenshot(driver, tmp_path: Path, name: str, whole: bool = True) -> None:
    """The page (`whole`: all of it, the window made as tall as the page) as `name` in the test's tmp
    folder, and in $MEMBENCH_BOARD_SHOTS where that is set."""
    if whole:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, min(height + 140, 5000))  # + the window's frame
    for folder in [tmp_path] + ([Path(os.environ["MEMBENCH_BOARD_SHOTS"])]
                                if os.environ.get("MEMBENCH_BOARD_SHOTS") else []):
        folder.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(folder / name))
    driver.set_window_size(1400, 1000)


def headline_values(rows: list[list[str]], column: int = 3) -> list[float]:
    return [float(row[column].split()[0]) for row in rows]


def test_index_shows_two_groups_sorts_each_within_itself_and_filters_both(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get((site / "index.html").as_uri())
    browser_errors(driver)
    assert headers(driver, "overview") == ["model", "kind", "sparsity", "mink ↓", "other ↓"]  # one header: same columns
    assert group_heads(driver, "overview") == [["real", "Real models", "6 models", 5],
                                               ["control", "Reference controls", "2 models", 5]]
    note = driver.find_element(By.CSS_SELECTOR, "tbody[data-group=control] .group-note").text
    assert "self-test" in note and "not contestants" in note
    assert [row[0] for row in visible_rows(driver, "overview", "control")] == [REF, TWIN]
    assert len(visible_rows(driver, "overview", "real")) == 6
    assert driver.find_element(By.ID, "shown").text == "8 of 8 models"
    # a real model's run with changed settings is marked, a control's is not; the legend names the settings
    cells = {row[0]: row[3] for row in visible_rows(driver, "overview")}
    assert cells[f"model-a ({ID_A[:8]})"] == "0.610 [0.560, 0.660] ‡" and cells[REF] == "0.990 [0.940, 1.040]"
    changed_text = driver.find_element(By.ID, "changed").text
    assert f"model-a ({ID_A[:8]}), mink_membership: lengths" in changed_text and "membench-ref" not in changed_text

    click_header(driver, "overview", "mink")  # ascending: best (lowest) first, in each group
    real, controls = visible_rows(driver, "overview", "real"), visible_rows(driver, "overview", "control")
    assert headline_values(real) == sorted(headline_values(real)) and headline_values(real)[0] == 0.50
    assert [row[0] for row in controls] == [TWIN, REF]  # 0.49 sorts first among the controls ...
    assert visible_rows(driver, "overview") == real + controls  # ... and stays below every real model
    click_header(driver, "overview", "mink")  # and descending
    real, controls = visible_rows(driver, "overview", "real"), visible_rows(driver, "overview", "control")
    assert headline_values(real) == sorted(headline_values(real), reverse=True) and headline_values(real)[0] == 0.72
    assert [row[0] for row in controls] == [REF, TWIN]
    click_header(driver, "overview", "other")  # a column most models lack: the empty cells stay last
    assert [row[4] for row in visible_rows(driver, "overview", "real")][:2] == ["0.300 [0.250, 0.350]", ""]
    assert [row[4] for row in visible_rows(driver, "overview", "control")] == ["0.400 [0.350, 0.450]", ""]
    click_header(driver, "overview", "mink")
    screenshot(driver, tmp_path, "index.png")

    select(driver, "filter-kind", "masked-lm")  # a filter acts on both groups; their headings count
    assert [row[0] for row in visible_rows(driver, "overview")] == [f"bert-c ({ID_C[:8]})"]
    assert [head[2] for head in group_heads(driver, "overview")] == ["1 of 6 models", "0 of 2 models"]
    select(driver, "filter-kind", "")
    select(driver, "filter-group", "control")
    assert [head[0] for head in group_heads(driver, "overview")] == ["control"]
    assert [row[0] for row in visible_rows(driver, "overview")] == [TWIN, REF]
    assert driver.find_element(By.ID, "shown").text == "2 of 8 models"
    select(driver, "filter-group", "real")
    assert len(visible_rows(driver, "overview")) == 6 and TWIN not in str(visible_rows(driver, "overview"))
    select(driver, "filter-group", "")
    select(driver, "filter-sparsity", "pruned")
    assert [row[0] for row in visible_rows(driver, "overview")] == [f"model-a-pruned ({ID_D[:8]})"]
    select(driver, "filter-sparsity", "")
    select(driver, "filter-run", "limit")
    assert [row[0] for row in visible_rows(driver, "overview")] == [f"quick-e ({ID_E[:8]}) † limit 5"]
    select(driver, "filter-run", "")
    select(driver, "filter-task", "other_task")  # only the models that ran it, only its column
    assert headers(driver, "overview") == ["model", "kind", "sparsity", "other ↓"]
    assert visible_rows(driver, "overview", "real") == [[f"model-b ({ID_B[:8]})", "causal-lm", "",
                                                         "0.300 [0.250, 0.350]"]]
    assert visible_rows(driver, "overview", "control") == [[REF, "causal-lm", "", "0.400 [0.350, 0.450]"]]
    assert [head[3] for head in group_heads(driver, "overview")] == [4, 4]  # the headings span what is shown
    screenshot(driver, tmp_path, "index-filtered.png")
    select(driver, "filter-task", "")
    driver.find_element(By.ID, "search").send_keys("IMG SRC")
    [evil_row] = visible_rows(driver, "overview")
    assert evil_row[0] == f"{EVIL} ({ID_F[:8]})"  # shown as text
    assert driver.execute_script("return window.pwned === undefined && document.images.length === 0")
    driver.find_element(By.ID, "search").clear()
    driver.find_element(By.ID, "search").send_keys("model-a")  # the twin is found too, in its group
    assert [row[0] for row in visible_rows(driver, "overview", "control")] == [TWIN]
    assert driver.find_element(By.ID, "shown").text == "3 of 8 models"
    assert browser_errors(driver) == []


def test_model_pages_say_their_group_and_changed_settings(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get((site / "index.html").as_uri())
    driver.find_element(By.ID, "search").send_keys("model-b")
    assert driver.find_element(By.ID, "shown").text == "1 of 8 models"
    driver.find_element(By.LINK_TEXT, f"model-b ({ID_B[:8]})").click()
    assert driver.current_url.endswith(f"models/model-b-{ID_B[:12]}.html")
    assert driver.find_element(By.TAG_NAME, "h1").text == "model-b"
    assert driver.find_element(By.ID, "group").text.startswith("Real model. Scored like any submission")
    page = driver.find_element(By.TAG_NAME, "main").text
    assert ID_B in page and "./model-b" in page and '"batch_size": 16' in page  # identity, source, settings
    assert [row[:3] for row in visible_rows(driver, "headlines")] == [
        ["mink_membership", "Min-K% 20% AUC, 128 words (lower is better)", "0.720 [0.670, 0.770]"],
        ["other_task", "Min-K% 20% AUC, 128 words (lower is better)", "0.300 [0.250, 0.350]"]]
    assert "0.710 [0.660, 0.760]" in page  # every metric of each task: the AUC at length 64

    driver.get((site / "models" / f"model-a-{ID_A[:12]}.html").as_uri())
    assert visible_rows(driver, "headlines")[0][2] == "0.610 [0.560, 0.660] ‡"
    assert "‡ mink_membership settings changed from the task's defaults: lengths=32,64,128" in \
        driver.find_element(By.ID, "identity").text
    screenshot(driver, tmp_path, "model.png", whole=False)
    driver.get((site / "models" / f"model-a-untrained-seed0-{ID_G[:12]}.html").as_uri())
    assert driver.find_element(By.ID, "group").text.startswith("Reference control. The benchmark's self-test")
    driver.get((site / "models" / "membench-ref-xsum-gpt2-e30-999999999999.html").as_uri())
    assert "‡" not in driver.find_element(By.TAG_NAME, "main").text  # its changed settings: the job's choice
    screenshot(driver, tmp_path, "model-control.png", whole=False)
    assert browser_errors(driver) == []


def test_task_page_splits_its_summary_draws_its_plot_and_filters_its_full_table(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get((site / "tasks" / "mink_membership.html").as_uri())
    browser_errors(driver)
    traces = driver.execute_script("return document.getElementById('plot').data.map(t => t.name)")
    assert len(traces) == 8
    assert "&lt;img src=x onerror=\"window.pwned=1\"&gt;&lt;b&gt;bold&lt;/b&gt; (ffffffff)" in traces
    assert f"model-a ({ID_A[:8]}) ‡" in traces and REF in traces
    legend = driver.execute_script("return Array.from(document.querySelectorAll('#plot .legendtext'))"
                                   ".map(t => t.textContent)")
    assert f"{EVIL} (ffffffff)" in legend  # plotly shows the escaped name as the text it is
    assert driver.execute_script("return window.pwned === undefined && document.images.length === 0")
    assert [head[:3] for head in group_heads(driver, "summary")] == [["real", "Real models", "6 models"],
                                                                     ["control", "Reference controls", "2 models"]]
    real = visible_rows(driver, "summary", "real")
    assert len(real) == 6 and f"model-a ({ID_A[:8]}) ‡" in [row[0] for row in real]
    assert [row[0] for row in visible_rows(driver, "summary", "control")] == [REF, TWIN]
    click_header(driver, "summary", "Min-K%")  # each group sorted within itself
    assert [row[0] for row in visible_rows(driver, "summary", "control")] == [TWIN, REF]
    assert visible_rows(driver, "summary")[-2:] == visible_rows(driver, "summary", "control")
    assert f"model-a ({ID_A[:8]}): lengths" in driver.find_element(By.ID, "changed").text
    driver.execute_script("document.querySelector('h2').scrollIntoView()")
    screenshot(driver, tmp_path, "task.png", whole=False)
    assert len(visible_rows(driver, "all-metrics")) == 8 * 3  # a row per (model, length)
    driver.find_element(By.CSS_SELECTOR, "input.row-filter").send_keys("quick-e")
    assert {row[0] for row in visible_rows(driver, "all-metrics")} == {f"quick-e ({ID_E[:8]}) † limit 5"}
    assert driver.find_element(By.CSS_SELECTOR, "article.card h1").text.startswith("Task card: mink_membership")

    driver.get((site / "tasks" / "other_task.html").as_uri())  # a group without runs says so
    assert [row[0] for row in visible_rows(driver, "summary", "real")] == [f"model-b ({ID_B[:8]})"]
    assert [row[0] for row in visible_rows(driver, "summary", "control")] == [REF]
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
