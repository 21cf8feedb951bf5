"""User mistakes vs bugs: a UserError becomes one message and exit status 2, no traceback."""


class UserError(Exception):
    """A mistake the user can fix (bad recipe, bad key, missing data, bad checkpoint)."""

    exit_code = 2
