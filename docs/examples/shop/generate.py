"""Prints one table of the shop's data as CSV (a header row, then its rows in the table's column order): the table
named by TIERLAB_TABLE, at the scale factor TIERLAB_SCALE_FACTOR (1: 20000 customers, 2000 products, 200000 orders). The same
table and scale factor always give the same rows. Standard library only, so that it runs on any host."""

import csv
import datetime
import os
import random
import sys

COUNTRIES = ["DE", "FR", "US", "JP", "BR", "IN", None]
CATEGORIES = ["books", "garden", "kitchen", "music", "sports", "toys"]
STATUSES = ["placed", "paid", "shipped", "returned"]
FIRST_DAY = datetime.date(2024, 1, 1)


def product_count(scale: float) -> int:
    return max(1, int(2000 * scale))


def customers(scale: float, rows):
    rows.writerow(["id", "name", "country", "signed_up"])
    for key in range(1, int(20000 * scale) + 1):
        country = random.choice(COUNTRIES)
        rows.writerow([key, f"Customer {key}, account {key % 97}", "NULL" if country is None else country,
                       FIRST_DAY + datetime.timedelta(days=key % 700)])


def products(scale: float, rows):
    rows.writerow(["id", "name", "category", "price"])
    for key in range(1, product_count(scale) + 1):
        rows.writerow([key, f'Product "{key}"', random.choice(CATEGORIES), f"{random.uniform(1, 500):.2f}"])


def orders(scale: float, rows):
    rows.writerow(["id", "customer_id", "ordered_at", "status"])
    customer_count = int(20000 * scale)
    for key in range(1, int(200000 * scale) + 1):
        rows.writerow([key, random.randint(1, customer_count), FIRST_DAY + datetime.timedelta(days=key * 700 // (200000 * scale)),
                       random.choice(STATUSES)])


def order_lines(scale: float, rows):
    rows.writerow(["order_id", "line_no", "product_id", "quantity", "price"])
    for order in range(1, int(200000 * scale) + 1):
        for line in range(1, random.randint(1, 7) + 1):
            rows.writerow([order, line, random.randint(1, product_count(scale)), random.randint(1, 5), f"{random.uniform(1, 500):.2f}"])


TABLES = {"customers": customers, "products": products, "orders": orders, "order_lines": order_lines}

if __name__ == "__main__":
    table, scale = os.environ["TIERLAB_TABLE"], float(os.environ["TIERLAB_SCALE_FACTOR"])
    random.seed(f"{table} {scale}")
    TABLES[table](scale, csv.writer(sys.stdout, lineterminator="\n"))
