"""`/?q=` fills the box for everyone; it asks by itself only for a navigation the person made."""

from __future__ import annotations

import pytest
from django.urls import reverse

from search.models import Entry

pytestmark = pytest.mark.django_db


def home(client, **headers):
    return client.get(reverse("search:home"), {"q": "spend my quota"}, headers=headers)


@pytest.mark.parametrize("site", ["none", "same-origin"])
def test_the_persons_own_navigation_asks(owner_client, site):
    # "none": the address bar, a bookmark, or the browser's search box (the OpenSearch URL)
    response = home(owner_client, **{"Sec-Fetch-Site": site})
    page = response.content.decode()
    assert "spend my quota</textarea>" in page and 'data-autoask="1"' in page
    assert "Sec-Fetch-Site" in response["Vary"]


@pytest.mark.parametrize("site", ["cross-site", "same-site", "", "bogus"])
def test_a_link_from_elsewhere_only_fills_the_box(owner_client, site):
    headers = {"Sec-Fetch-Site": site} if site else {}  # "": a browser without the header
    page = home(owner_client, **headers).content.decode()
    assert "spend my quota</textarea>" in page
    assert "data-autoask" not in page
    assert not Entry.objects.exists()


def test_the_opensearch_url_is_the_one_that_asks(owner_client):
    description = owner_client.get(reverse("search:opensearch")).content.decode()
    assert "?q={searchTerms}" in description


def test_the_redirect_after_signing_in_only_fills_the_box(owner_client):
    # signed out, a link from another site leads to the sign-in page, whose redirect is same-origin
    referer = "http://testserver/accounts/login/?next=/%3Fq%3Dspend%2Bmy%2Bquota"
    page = home(owner_client, **{"Sec-Fetch-Site": "same-origin", "Referer": referer}).content.decode()
    assert "spend my quota</textarea>" in page and "data-autoask" not in page
    page = home(
        owner_client, **{"Sec-Fetch-Site": "same-origin", "Referer": "http://testserver/history/"}
    ).content.decode()
    assert 'data-autoask="1"' in page
