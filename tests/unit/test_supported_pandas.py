"""The pandas the lock file installs is one PySpark 4.2 supports (issue 16).

PySpark checks the pandas version whenever a DataFrame meets pandas or Arrow
(``require_minimum_pandas_version``) and warns "PySpark does not yet fully support pandas
>= 3.0.0" for 3.x; ``requirements.in`` pins ``pandas>=2.2.0,<3`` for that reason.  Fails
(warning turned error) if the lock moves pandas out of that range again.
"""
from __future__ import annotations

import warnings
from importlib.metadata import version

from pyspark.sql.pandas.utils import require_minimum_pandas_version


def test_the_locked_pandas_is_one_pyspark_supports_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_minimum_pandas_version()
    installed = version("pandas")
    assert int(installed.split(".")[0]) == 2, f"pandas {installed}: PySpark 4.2 supports >= 2.2.0, < 3"
