"""The notebook widget: ``StudyWidget(study)`` (what ``study.show()`` returns).

``viewmodel.view_model(study)`` is the plain-data view the widget displays; the front end is
one ES module (``static/widget.js``, built from ``widgets/`` in the repository).
"""

from __future__ import annotations

from .viewmodel import view_model
from .widget import StudyWidget

__all__ = ["StudyWidget", "view_model"]
