"""An exception on one rank: rank 1 reads a corrupt record (a KeyError from its data pipeline)
and dies while rank 0 waits for it in the next collective."""

from common import parse
from drivers import FRAMEWORKS, drive


def corrupt_record():
    record = {"text": "w1 w2 w3"}
    return record["input_ids"]  # the record was written without its tokens


if __name__ == "__main__":
    args, rest = parse(FRAMEWORKS, known=True)
    drive(args.framework, corrupt_record, cli_args=rest)
