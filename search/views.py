from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "search/home.html")


def history(request: HttpRequest) -> HttpResponse:
    return render(request, "search/history.html")
