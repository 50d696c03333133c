"""The file limits, for the attach button's hint and the page's script."""

from __future__ import annotations

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def attachment_limits() -> dict:
    return {"per_question": settings.ATTACHMENTS_PER_QUESTION, "max_mb": settings.ATTACHMENT_MAX_MB}
