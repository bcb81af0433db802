import bayes_activeeval as bae


def test_version():
    assert bae.__version__
