"""Sign-in throttling never locks out the right person (accounts/signin.py): wrong passwords from
other addresses slow guessing down but never refuse the right password from an address that has
not been failing; only failures count; an IPv6 address counts by its /64."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quick_hashes(settings, owner):
    """A fast hasher: these tests sign in a hundred times, and what they check is the counting."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    owner.set_password(PASSWORD)
    owner.save()


def sign_in(password: str, address: str, username: str = "owner") -> int:
    response = Client().post(
        reverse("accounts:login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return response.status_code


def test_ten_wrong_passwords_from_another_address_do_not_refuse_the_right_one(owner, settings):
    settings.LOGIN_RATE_PER_USER = 10
    for _ in range(10):
        assert sign_in("wrong", "198.51.100.66") == 200
    assert sign_in("wrong", "198.51.100.66") == 429  # that address has been failing
    assert sign_in(PASSWORD, "192.168.1.20") == 302  # the owner, at home


def test_a_name_guessed_at_from_many_addresses_slows_each_but_lets_the_owner_in(owner, settings):
    settings.LOGIN_RATE_PER_USER = 10
    for n in range(30):  # one guess each from 30 addresses: the name's own count is used up
        assert sign_in("wrong", f"203.0.113.{n}") == 200
    # a new guessing address now gets two tries at the name (each costs five of its ten), not ten
    assert [sign_in("wrong", "203.0.113.200") for _ in range(3)] == [200, 200, 429]
    assert sign_in(PASSWORD, "192.168.1.20") == 302  # an address that has not been failing
    # the owner signing in does not let the guessers off
    assert [sign_in("wrong", "203.0.113.201") for _ in range(3)] == [200, 200, 429]
    # even one wrong try of the owner's own still leaves the right one its turn
    assert sign_in("typo", "192.168.1.21") == 200
    assert sign_in(PASSWORD, "192.168.1.21") == 302


def test_only_failures_count(owner, settings):
    settings.LOGIN_RATE_PER_IP = 3
    settings.LOGIN_RATE_PER_USER = 3
    for _ in range(10):  # a household signing in all day from one address
        assert sign_in(PASSWORD, "192.168.1.20") == 302
    assert [sign_in("wrong", "192.168.1.20") for _ in range(4)] == [200, 200, 200, 429]


def test_a_right_password_clears_its_address_for_that_name(owner, settings):
    settings.LOGIN_RATE_PER_USER = 3
    assert [sign_in("typo", "192.168.1.20") for _ in range(2)] == [200, 200]
    assert sign_in(PASSWORD, "192.168.1.20") == 302
    # the address's count for the name is full again, and the name's own count keeps the two
    # failures: after a third the name counts as guessed at, and a try costs the whole allowance
    assert [sign_in("typo", "192.168.1.20") for _ in range(2)] == [200, 429]
    assert sign_in(PASSWORD, "192.168.1.21") == 302


def test_an_address_that_keeps_failing_is_refused_whatever_the_name(owner, settings):
    settings.LOGIN_RATE_PER_IP = 3
    for n in range(3):
        assert sign_in("x", "198.51.100.7", username=f"guess{n}") == 200
    assert sign_in(PASSWORD, "198.51.100.7") == 429
    assert sign_in(PASSWORD, "198.51.100.8") == 302


def test_an_ipv6_address_counts_by_its_64(owner, settings):
    settings.LOGIN_RATE_PER_IP = 2
    assert sign_in("x", "2001:db8:0:7::1", username="a") == 200
    assert sign_in("x", "2001:db8:0:7::2", username="b") == 200
    assert sign_in("x", "2001:db8:0:7:ffff::3", username="c") == 429  # another address, the same /64
    assert sign_in(PASSWORD, "2001:db8:0:8::1") == 302  # the next /64
