"""SCRAM-SHA-256 (spark_log.scram): RFC 7677's test vector, and every way a proof can be wrong."""
from __future__ import annotations

import base64

import pytest

from spark_log import scram
from spark_log.errors import AuthenticationError, InvalidConfigError

# RFC 7677, section 3: user "user", password "pencil"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
NONCE = CLIENT_NONCE + "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = f"r={NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = f"c=biws,r={NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_vector_client_and_server() -> None:
    client = scram.ScramClient("user", "pencil", CLIENT_NONCE)
    assert client.first() == f"n,,n=user,r={CLIENT_NONCE}"
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    credential = scram.make_credential("pencil", SALT, 4096)
    username, nonce, bare = scram.parse_client_first(client.first())
    assert (username, nonce) == ("user", CLIENT_NONCE)
    server_final = scram.verify_client_final(CLIENT_FINAL, client_first_bare_message=bare, server_first=SERVER_FIRST,
                                             nonce=NONCE, credential=credential)
    assert server_final == SERVER_FINAL
    client.verify(server_final)  # the client accepts the server's signature


def test_wrong_password_replayed_nonce_and_forged_server_are_refused() -> None:
    credential = scram.make_credential("pencil", SALT, 4096)
    bare = f"n=user,r={CLIENT_NONCE}"
    wrong = scram.ScramClient("user", "pencil!", CLIENT_NONCE)
    wrong.first()
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        scram.verify_client_final(wrong.final(SERVER_FIRST), client_first_bare_message=bare,
                                  server_first=SERVER_FIRST, nonce=NONCE, credential=credential)
    with pytest.raises(AuthenticationError, match="nonce"):
        scram.verify_client_final(CLIENT_FINAL, client_first_bare_message=bare, server_first=SERVER_FIRST,
                                  nonce=NONCE + "x", credential=credential)
    client = scram.ScramClient("user", "pencil", CLIENT_NONCE)
    client.final(SERVER_FIRST)
    with pytest.raises(AuthenticationError, match="signature"):
        client.verify("v=" + base64.b64encode(b"\0" * 32).decode())
    with pytest.raises(AuthenticationError, match="extend"):
        scram.ScramClient("user", "pencil", CLIENT_NONCE).final("r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_usernames_are_escaped_and_messages_parsed_strictly() -> None:
    client = scram.ScramClient("a=b,c", "pw", "nonce")
    assert client.first() == "n,,n=a=3Db=2Cc,r=nonce"
    assert scram.parse_client_first(client.first())[0] == "a=b,c"
    for bad in ("y,,n=u,r=x", "n,,r=x", "n,,n=u", "n,,n=a=b,r=x"):
        with pytest.raises(AuthenticationError):
            scram.parse_client_first(bad)


def test_credentials_are_checked_and_never_shown() -> None:
    with pytest.raises(InvalidConfigError):
        scram.make_credential("pw", b"short", 4096)
    with pytest.raises(InvalidConfigError):
        scram.make_credential("pw", SALT, 1000)
    with pytest.raises(InvalidConfigError):
        scram.make_credential("", SALT, 4096)
    credential = scram.make_credential("pencil", SALT, 4096)
    assert "stored_key" not in repr(credential) and "pencil" not in repr(scram.ScramClient("user", "pencil", "n"))
