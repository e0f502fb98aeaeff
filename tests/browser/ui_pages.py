"""The Airflow 3 UI pages the browser test opens, and waiting for text to be shown on them.

The UI is a React app served by the api-server; its routes (from the bundled router in
`airflow/ui/dist/assets/index-*.js`) for one task instance are `/dags/{dag}/runs/{run}/tasks/{task}` (the
Logs tab, the default), `.../rendered_templates` (the Rendered Templates tab) and `.../xcom` (the Storage tab, on
its XCom list; Airflow 3.3 has no tab called XCom).

"Visible" is Selenium's own notion: `WebElement.text` is the text a person sees (hidden elements contribute
nothing), so a wait on the page body's text holding every expected piece is a wait until it is on screen.
The UI highlights rendered fields token by token, and Selenium reports those tokens on lines of their own
(`waiting \nfor\n the pods ... (\nReady\n=\nUnknown\n)`), so text is compared with all whitespace removed.
Waits are explicit (`WebDriverWait` on a condition), bounded, and on timeout say what the page showed instead.

"On screen whole" is measured (`on_screen`): the boxes the browser drew a text in, against the viewport (its width
and its height, once the page is scrolled vertically to the text, as a person would) and every box that clips
them. What Airflow 3.3.2's UI does with long lines, read in its bundled source and seen here: the Logs tab wraps
them only when its Wrap setting is on (the `w` shortcut, or `[api] default_wrap`, off by default); the Rendered
Templates tab never does (it asks its highlighter to wrap, and the highlighter's theme sets `white-space: pre`
over it; it ignores `template_fields_renderers` and picks a language from the text); Storage → XCom wraps.
"""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: seconds a page may take to show what the test waits for (a failure bound: the UI fetches, then renders)
SHOW_BOUND = 90.0


def task_instance_url(base_url: str, dag_id: str, run_id: str, task_id: str, tab: str = "") -> str:
    run = urllib.parse.quote(run_id, safe="")
    url = f"{base_url}/dags/{dag_id}/runs/{run}/tasks/{task_id}"
    return f"{url}/{tab}" if tab else url


def visible_text(driver: Any) -> str:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        return str(driver.find_element(By.TAG_NAME, "body").text)
    except StaleElementReferenceException:  # React re-rendered the page while it was read
        return ""


def squash(text: str) -> str:
    """`text` without any whitespace: how two renderings of the same words compare."""
    return re.sub(r"\s+", "", text)


def missing_from(text: str, expected: Sequence[str]) -> list[str]:
    shown = squash(text)
    return [piece for piece in expected if squash(piece) not in shown]


def open_and_wait_for(driver: Any, url: str, expected: Sequence[str], bound: float = SHOW_BOUND) -> str:
    """Open `url` and wait until every piece of `expected` is visible on it; returns the visible text."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    try:
        WebDriverWait(driver, bound, poll_frequency=0.5).until(lambda d: not missing_from(visible_text(d), expected))
    except TimeoutException:
        shown = visible_text(driver)
        raise AssertionError(
            f"{url} did not show {missing_from(shown, expected)} within {bound:.0f} s; it showed:\n{shown[:6000]}"
        ) from None
    return visible_text(driver)


def scroll_into_view(driver: Any, text: str) -> bool:
    """Bring the innermost element showing `text` into view for the screenshot: scrolled vertically only if it
    is off screen, and every scrolled box it sits in back at its left edge (a long line scrolled sideways
    would hide the field names and log timestamps)."""
    script = r"""
        const squash = t => t.replace(/\s+/g, '');
        const wanted = squash(arguments[0]);
        const all = Array.from(document.querySelectorAll('body *'));
        const holders = all.filter(e => e.innerText && squash(e.innerText).includes(wanted));
        const innermost = holders.filter(e => !Array.from(e.children).some(c => holders.includes(c)));
        if (!innermost.length) { return false; }
        const target = innermost[0];
        const box = target.getBoundingClientRect();
        if (box.top < 0 || box.bottom > window.innerHeight) { target.scrollIntoView({block: 'center'}); }
        for (let e = target; e; e = e.parentElement) { e.scrollLeft = 0; }
        return true;
    """
    return bool(driver.execute_script(script, text))


def on_screen(driver: Any, text: str) -> dict[str, Any]:
    """Where `text` (compared without whitespace) is drawn, as a person would have to find it: the page scrolled
    vertically to its first occurrence (never sideways), then the on-screen boxes of that very text (a DOM `Range`
    over it, so a long line around it counts only if the text itself runs off), the viewport's width, and
    whether every box is inside the viewport and inside each box that clips it (an ancestor with `overflow` other
    than `visible`): `visible` is True only when the whole text is inside the viewport, so it can be read without
    scrolling horizontally (nor further vertically)."""
    script = r"""
        const wanted = arguments[0].replace(/\s+/g, '');
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        const chars = [];  // every non-space character of the page: [text node, offset]
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const data = node.data;
            for (let i = 0; i < data.length; i++) { if (!/\s/.test(data[i])) { chars.push([node, i]); } }
        }
        const squashed = chars.map(([node, i]) => node.data[i]).join('');
        const measure = (at) => {
            const range = document.createRange();
            range.setStart(chars[at][0], chars[at][1]);
            const [endNode, endOffset] = chars[at + wanted.length - 1];
            range.setEnd(endNode, endOffset + 1);
            return range;
        };
        let at = squashed.indexOf(wanted);
        const result = {found: false, visible: false, viewport: window.innerWidth, boxes: [], clipped_by: []};
        while (at >= 0) {
            const range = measure(at);
            const rects = Array.from(range.getClientRects()).filter(r => r.width > 0 && r.height > 0);
            if (rects.length) {
                result.found = true;
                const first = rects[0];
                if (first.top < 0 || first.bottom > window.innerHeight) {
                    range.startContainer.parentElement.scrollIntoView({block: 'center', inline: 'nearest'});
                }
                for (let e = range.startContainer.parentElement; e; e = e.parentElement) { e.scrollLeft = 0; }
                const boxes = Array.from(range.getClientRects()).filter(r => r.width > 0 && r.height > 0);
                result.boxes = boxes.map(r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom}));
                const clips = [];
                for (let e = range.commonAncestorContainer.parentElement || range.commonAncestorContainer;
                     e && e !== document.documentElement; e = e.parentElement) {
                    const style = getComputedStyle(e);
                    if (style.overflowX !== 'visible') {
                        const box = e.getBoundingClientRect();
                        if (boxes.some(r => r.left < box.left - 1 || r.right > box.right + 1)) {
                            clips.push(`${e.tagName.toLowerCase()}.${e.className}`.slice(0, 120));
                        }
                    }
                }
                result.clipped_by = clips;
                result.height = window.innerHeight;
                result.visible = clips.length === 0 && boxes.every(
                    r => r.left >= 0 && r.right <= window.innerWidth && r.top >= 0 && r.bottom <= window.innerHeight);
                return result;
            }
            at = squashed.indexOf(wanted, at + 1);
        }
        return result;
    """
    found: dict[str, Any] = driver.execute_script(script, text)
    return found


def wait_until_on_screen(driver: Any, text: str, bound: float = SHOW_BOUND) -> dict[str, Any]:
    """Wait until `text` is drawn whole inside the viewport (`on_screen`: found and visible); return the last
    measurement either way, so that the caller's assertion says where it was drawn instead."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    last: dict[str, Any] = {}

    def readable(d: Any) -> bool:
        last.clear()
        last.update(on_screen(d, text))
        return bool(last["found"] and last["visible"])

    with contextlib.suppress(TimeoutException):
        WebDriverWait(driver, bound, poll_frequency=0.5).until(readable)
    return dict(last)


def press(driver: Any, key: str) -> None:
    """Press `key` with nothing focused (the page's keyboard shortcuts listen on the document), as a person would."""
    from selenium.webdriver.common.by import By

    driver.execute_script("document.activeElement && document.activeElement.blur();")
    driver.find_element(By.TAG_NAME, "body").send_keys(key)


def screenshot(driver: Any, path: Path) -> Path:
    if not driver.save_screenshot(str(path)):
        raise AssertionError(f"Chromium could not save a screenshot to {path}")
    return path


__all__ = [
    "SHOW_BOUND",
    "missing_from",
    "on_screen",
    "open_and_wait_for",
    "press",
    "screenshot",
    "scroll_into_view",
    "squash",
    "task_instance_url",
    "visible_text",
    "wait_until_on_screen",
]
