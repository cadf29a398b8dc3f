"""MkDocs hook of the user guide (mkdocs.yml): links that leave docs/.

The method pages link to files beside docs/ (bench/RESULTS.md, bench/history/*.md), which the
site does not contain. Each such link is checked (the file must exist in the repository, else a
warning, which `mkdocs build --strict` turns into a failure) and then written as its text and the
repository path, or as a link into the repository when mkdocs.yml sets repo_url.
"""
import logging
import os
import re

log = logging.getLogger("mkdocs.hooks.fmmkit")

# [text](../path#anchor): the text may span lines; only relative links that climb out of docs/.
LINK = re.compile(r"\[([^\]]+)\]\(\s*((?:\.\./)+[^)\s#]+)(#[^)\s]*)?\s*\)")


def on_page_markdown(markdown, page, config, files):
    docs = os.path.abspath(config["docs_dir"])
    root = os.path.dirname(os.path.abspath(config["config_file_path"]))
    here = os.path.dirname(os.path.join(docs, page.file.src_path))
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def rewrite(m):
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        path = os.path.normpath(os.path.join(here, target))
        if path.startswith(docs + os.sep):
            return m.group(0)  # inside docs/: MkDocs checks it
        rel = os.path.relpath(path, root)
        if rel.startswith("..") or not os.path.exists(path):
            log.warning("Doc file '%s' links to '%s', which is not a file of the repository",
                        page.file.src_path, target)
            return m.group(0)
        if repo_url:
            return f"[{text}]({repo_url}/blob/main/{rel}{anchor})"
        shown = f"`{rel}{anchor}`"
        return text if text.strip("` ") == rel and not anchor else f"{text} ({shown})"

    return LINK.sub(rewrite, markdown)
