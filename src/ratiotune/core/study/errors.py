"""StudyError: a study that cannot run, said in one line per problem."""


class StudyError(Exception):
    """A study that cannot run. The message is for people: field, value, what is allowed."""
