"""An answer: the CLI's --json document as a dict (equal to it), with the CLI's text, exit status and notes."""
import html
import json


class Answer(dict):
    """The answer `name` as ``allocscope NAME ... --json`` prints it: a dict equal to that document. ``str()`` and
    ``.text`` give the CLI's text; ``.exit_code`` its status (``leaks``: 3 on a suspected leak; ``check``: 3 on a
    regression); ``.notes`` what it says on stderr. In a notebook it shows as its text."""

    def __init__(self, name, document, exit_code, notes, text_of):
        super().__init__(document)
        self.name = name
        self.exit_code = exit_code
        self.notes = notes
        self._text_of = text_of
        self._text = None

    @property
    def text(self):
        if self._text is None:
            self._text = self._text_of()
        return self._text

    @property
    def ok(self):
        """False when the answer is a finding a script should stop on (a suspected leak, a regression)."""
        return self.exit_code == 0

    def to_json(self, **kwargs):
        return json.dumps(self, **kwargs)

    def __str__(self):
        return self.text

    def _repr_html_(self):
        return '<pre class="allocscope-answer">%s</pre>' % html.escape(self.text)
