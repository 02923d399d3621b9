"""Image parts of a request: chat's ``image_url`` parts and the Responses API's ``input_image``
items, by URL or as a data URL. A program with an image input field (``dspy.Image``, or
``list[dspy.Image]``) gets them there as ``dspy.Image`` values, so its code can hand them to a
vision model; a text-only program answers from the text, and the response's metadata says the
images were not read (rather than the call failing)."""

from __future__ import annotations

import re
import typing
from typing import Any

import dspy

from rlmkit.serve.errors import bad_request
from rlmkit.serve.program import Program

IMAGE_URL = re.compile(r"^(https?://\S+|data:image/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+)$")
NOTE_KEY = "rlmkit_images"  # the metadata key a text-only program's response says it under


def image_url(part: dict[str, Any], where: str, param: str = "messages") -> str:
    """The URL of one image part (chat: ``{"image_url": {"url"}}``; Responses: ``{"image_url"}``)."""
    found = part.get("image_url")
    url = found.get("url") if isinstance(found, dict) else found
    if not isinstance(url, str) or not IMAGE_URL.match(url[:200] + url[-50:] if len(url) > 250 else url):
        raise bad_request(f"{where}: an image part needs an http(s) or base64 data URL", param=param)
    return url


def image_field(program: Program) -> str | None:
    """The first input field typed ``dspy.Image`` or ``list[dspy.Image]``."""
    for name, field in program.inputs.items():
        annotation = field.annotation
        if annotation is dspy.Image or (
            typing.get_origin(annotation) is list and typing.get_args(annotation) == (dspy.Image,)
        ):
            return name
    return None


def image_value(program: Program, name: str, urls: list[str]) -> Any:
    images = [dspy.Image(url=url) for url in urls]
    return images[0] if program.inputs[name].annotation is dspy.Image and len(images) == 1 else images


def unread_note(program: Program, urls: list[str]) -> dict[str, str]:
    """What a response's metadata says when the program could not take the request's images."""
    if not urls or image_field(program) is not None:
        return {}
    return {
        NOTE_KEY: f"{len(urls)} image(s) not read: this program takes no image input; answered from the text"
    }
